import { beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parser } from '@prometheus-io/lezer-promql';
import { Registry } from 'prom-client';
import { CycloneStats } from 'cyclone-nestjs';
import { CycloneMetrics } from 'cyclone-nestjs/metrics';
import { resolveMetricsOptions } from '../libs/cyclone/src/metrics/cyclone-metrics.js';

const DOCKER = fileURLToPath(new URL('../docker/', import.meta.url));
const read = (path: string) => readFileSync(`${DOCKER}${path}`, 'utf8');

interface Panel {
  type: string;
  title: string;
  targets?: { expr: string; refId: string }[];
}

/** Grafana's variables, as Prometheus would see them once Grafana has filled them in. */
const fillVariables = (expr: string) => expr.replaceAll('$__rate_interval', '5m').replaceAll('$queue', '.*');

/** What one PromQL expression names: its metrics, and the labels it groups or matches by. */
function namesIn(expr: string): { metrics: string[]; labels: string[]; errors: string[] } {
  const metrics: string[] = [];
  const labels: string[] = [];
  const errors: string[] = [];
  const parents: string[] = [];
  parser.parse(expr).iterate({
    enter: (node) => {
      const text = expr.slice(node.from, node.to);
      if (node.type.isError) errors.push(`a syntax error at ${node.from}: "${expr.slice(node.from, node.from + 20)}"`);
      if (node.name === 'Identifier' && parents.at(-1) === 'VectorSelector') metrics.push(text);
      if (node.name === 'LabelName') labels.push(text);
      parents.push(node.name);
    },
    leave: () => void parents.pop(),
  });
  return { metrics, labels, errors };
}

describe("docker/: Prometheus's config and the Grafana dashboard", () => {
  /** Every series name Cyclone's metrics expose, with the labels each has. */
  const series = new Map<string, Set<string>>();

  beforeAll(async () => {
    const registry = new Registry();
    const metrics = CycloneMetrics.create(resolveMetricsOptions({ registry }), new CycloneStats([100, 1_000]));
    metrics.onModuleInit();
    for (const { name, type } of await registry.getMetricsAsJSON()) {
      const labels = new Set<string>((registry.getSingleMetric(name) as unknown as { labelNames: string[] }).labelNames);
      if (String(type) === 'histogram') {
        series.set(`${name}_bucket`, new Set([...labels, 'le']));
        series.set(`${name}_sum`, labels);
        series.set(`${name}_count`, labels);
      } else {
        series.set(name, labels);
      }
    }
    metrics.onModuleDestroy();
  });

  const dashboard = JSON.parse(read('grafana/dashboards/cyclone.json')) as {
    uid: string;
    title: string;
    panels: Panel[];
    templating: { list: { name: string; query?: unknown; definition?: string }[] };
  };
  const graphs = dashboard.panels.filter((p) => p.type !== 'row');
  const queries = graphs.flatMap((p) => (p.targets ?? []).map((t) => [`${p.title} (${t.refId})`, t.expr] as const));

  it('is a Grafana dashboard whose every panel queries something', () => {
    expect(dashboard).toMatchObject({ uid: 'cyclone', title: 'Cyclone' });
    expect(graphs.length).toBeGreaterThanOrEqual(10);
    expect(graphs.filter((p) => (p.targets ?? []).length === 0).map((p) => p.title)).toEqual([]);
    // Every metric of the module is shown somewhere.
    const shown = new Set(queries.flatMap(([, expr]) => namesIn(fillVariables(expr)).metrics));
    const metricOf = (name: string) => name.replace(/_(bucket|sum|count)$/, '');
    expect([...new Set([...series.keys()].map(metricOf))].filter((m) => ![...shown].some((s) => metricOf(s) === m))).toEqual([]);
  });

  it('every query is valid PromQL naming metrics Cyclone exposes, by labels those metrics have', () => {
    expect(queries.length).toBeGreaterThan(0);
    for (const [where, expr] of queries) {
      const { metrics, labels, errors } = namesIn(fillVariables(expr));
      expect([where, errors]).toEqual([where, []]);
      expect([where, metrics.length]).not.toEqual([where, 0]);
      expect([where, metrics.filter((m) => !series.has(m))]).toEqual([where, []]);
      const known = new Set(metrics.flatMap((m) => [...(series.get(m) ?? [])]));
      expect([where, labels.filter((l) => !known.has(l))]).toEqual([where, []]);
    }
  });

  it("the queue variable lists a label of a metric that exists", () => {
    const queue = dashboard.templating.list.find((v) => v.name === 'queue')!;
    const [, metric, label] = /^label_values\((\w+), (\w+)\)$/.exec(queue.definition ?? '') ?? [];
    expect(series.get(metric)?.has(label)).toBe(true);
  });

  it("Prometheus scrapes the example app's GET /metrics on the API and on every worker replica", () => {
    const prometheus = read('prometheus.yml');
    const compose = read('docker-compose.yml');
    expect(prometheus).toMatch(/metrics_path: \/metrics\s+static_configs:\s+- targets: \['api:3000'\]/);
    const workerPort = /dns_sd_configs:\s+- names: \['worker'\]\s+type: A\s+port: (\d+)/.exec(prometheus)?.[1];
    expect(workerPort).toBeDefined();
    expect(compose).toContain(`METRICS_PORT: "${workerPort}"`);
    expect(compose).toMatch(/PORT: "3000"/);
    // The services that run them, with these files.
    expect(compose).toMatch(/\n  prometheus:\n[\s\S]*- \.\/prometheus\.yml:\/etc\/prometheus\/prometheus\.yml:ro/);
    expect(compose).toMatch(/\n  grafana:\n[\s\S]*- \.\/grafana\/dashboards:\/var\/lib\/grafana\/dashboards:ro/);
    expect(read('grafana/provisioning/dashboards/cyclone.yml')).toContain('path: /var/lib/grafana/dashboards');
    expect(read('grafana/provisioning/datasources/prometheus.yml')).toContain('url: http://prometheus:9090');
  });
});

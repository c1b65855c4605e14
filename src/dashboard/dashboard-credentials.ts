import { Logger } from '@nestjs/common';
import { randomBytes } from 'node:crypto';

export interface DashboardCredentials {
  user: string;
  password: string;
}

/**
 * The dashboard's login, from DASHBOARD_USER and DASHBOARD_PASSWORD. There
 * is no default login: in production (NODE_ENV=production, as the Docker
 * image sets) the app does not start without them; elsewhere, for a first
 * `npm start`, a password is made for this run and logged once, as a
 * development server does.
 */
export function dashboardCredentials(env: NodeJS.ProcessEnv = process.env): DashboardCredentials {
  const user = env.DASHBOARD_USER ?? '';
  const password = env.DASHBOARD_PASSWORD ?? '';
  if (user !== '' && password !== '') return { user, password };
  if (env.NODE_ENV === 'production' || user !== '' || password !== '') {
    throw new Error(
      'Set both DASHBOARD_USER and DASHBOARD_PASSWORD: the dashboard at /cyclone shows every job and can cancel them, ' +
        'and it has no default login.',
    );
  }
  const made = { user: 'admin', password: randomBytes(12).toString('base64url') };
  new Logger('Dashboard').warn(
    `No DASHBOARD_USER and DASHBOARD_PASSWORD: log in to /cyclone as ${made.user} with the password ${made.password}, ` +
      'made for this run. Set both to choose the login (in production they are required).',
  );
  return made;
}

/** DASHBOARD_READONLY: true for a dashboard that shows everything and changes nothing (no retry, cancel or pause). */
export function dashboardReadOnly(env: NodeJS.ProcessEnv = process.env): boolean {
  const value = (env.DASHBOARD_READONLY ?? '').trim().toLowerCase();
  if (value === '' || value === 'false' || value === '0') return false;
  if (value === 'true' || value === '1') return true;
  throw new Error(`DASHBOARD_READONLY must be true or false (or 1 or 0); got "${env.DASHBOARD_READONLY}".`);
}

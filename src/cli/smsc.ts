import { readFile } from 'node:fs/promises';
import { text } from 'node:stream/consumers';
import { Value } from 'typebox/value';
import type { Config } from '../config.ts';
import { systemClock } from '../clock.ts';
import { addConnection, listConnections, removeConnection } from '../sms/routing/connections.ts';
import { RoutesBody } from '../sms/routing/schemas.ts';
import { readRoutes, replaceRoutes, viewOf, type SmsRoute } from '../sms/routing/table.ts';
import { fieldPath } from '../http/validation.ts';
import { CommandError, groupCommand, HELP, parse, print, required, usage, UsageError } from './commands.ts';
import { keyringFor, withDatabase, withExistingDatabase } from './database.ts';

/** `herald smsc …`: the admin API's SMSC connections (POST, GET and DELETE /admin/smsc). */
export async function smscCommand(config: () => Config, action: string | undefined, args: string[]): Promise<void> {
  const command = groupCommand('smsc', action);
  if (command === undefined) return;
  const values = parse(command, args, {
    ...HELP,
    name: { type: 'string' },
    url: { type: 'string' },
    'url-stdin': { type: 'boolean' },
  });
  if (values.help) return console.log(usage(command));
  const settings = config();
  switch (action) {
    case 'add': {
      const name = required(command, values, 'name');
      if (values['url-stdin'] && values.url !== undefined) throw new UsageError(command, 'give --url or --url-stdin');
      const url = values['url-stdin']
        ? (await text(process.stdin)).replace(/\r?\n$/, '')
        : required(command, values, 'url');
      const connection = { name, url };
      return print(
        await withDatabase(settings, async (database) =>
          addConnection(database.db, await keyringFor(settings, database), systemClock, connection),
        ),
      );
    }
    case 'list': {
      const defaultTransport = { raw: settings.smsTransportUrl ?? 'sandbox:', kind: settings.smsTransport.kind };
      return print({
        smsc: await withExistingDatabase(settings, (database) =>
          listConnections(database.db, systemClock, defaultTransport),
        ),
      });
    }
    case 'remove': {
      const name = required(command, values, 'name');
      await withDatabase(settings, (database) => removeConnection(database.db, name));
      return print({ removed: name });
    }
  }
}

/** `herald routes …`: the admin API's routing table (PUT and GET /admin/sms-routes). */
export async function routesCommand(config: () => Config, action: string | undefined, args: string[]): Promise<void> {
  const command = groupCommand('routes', action);
  if (command === undefined) return;
  const values = parse(command, args, { ...HELP, file: { type: 'string' } });
  if (values.help) return console.log(usage(command));
  const settings = config();
  switch (action) {
    case 'set': {
      const routes = routesIn(await readFile(required(command, values, 'file'), 'utf8'));
      return print({ routes: await withDatabase(settings, (database) => replaceRoutes(database.db, routes)) });
    }
    case 'list':
      return print({
        routes: await withExistingDatabase(settings, async (database) => (await readRoutes(database.db)).map(viewOf)),
      });
  }
}

/** The file's table: PUT /admin/sms-routes's body, or its list alone, checked as that body is. */
function routesIn(text: string): SmsRoute[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new CommandError(`the routes file is not JSON: ${(error as Error).message}`);
  }
  const body = Array.isArray(parsed) ? { routes: parsed } : parsed;
  if (!Value.Check(RoutesBody, body)) {
    const faults = [...Value.Errors(RoutesBody, body)].map(
      (e) => `${fieldPath(e.instancePath) || '(the file)'}: ${e.message}`,
    );
    throw new CommandError(`the routes file is not a routing table:\n  ${faults.join('\n  ')}`);
  }
  return body.routes;
}

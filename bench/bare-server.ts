import Fastify from 'fastify';

/**
 * The baseline of bench/auth.ts: a bare Fastify route that answers a fixed JSON body of
 * the given size, with no database, no JWT and no hooks.
 */
const [port, tokenSize, accountSize] = process.argv.slice(2).map(Number);
const fill = (size: number) => JSON.stringify({ padding: 'x'.repeat(Math.max(0, size - 15)) });
const tokenBody = fill(tokenSize);
const accountBody = fill(accountSize);

const app = Fastify();
app.post('/token', async (_request, reply) => reply.type('application/json').send(tokenBody));
app.get('/account', async (_request, reply) => reply.type('application/json').send(accountBody));
await app.listen({ port, host: '127.0.0.1' });

// The I/O benchmark's three tools on the official MCP TypeScript SDK with express.
//   node bench/ts/server.mjs PORT WORKERS      (BENCH_API_URL, BENCH_REDIS_URL say where the backends are)
// Shaped as the public benchmark's Node server: node:cluster workers, a stateless Streamable
// HTTP transport and McpServer per request, fetch() for the API, one ioredis client per worker.
import cluster from 'node:cluster';
import express from 'express';
import Redis from 'ioredis';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

const PORT = parseInt(process.argv[2] || '8083', 10);
const WORKERS = parseInt(process.argv[3] || '2', 10);
const API = process.env.BENCH_API_URL || 'http://127.0.0.1:8100';
const REDIS = process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379/0';

if (cluster.isPrimary && WORKERS > 1) {
  for (let i = 0; i < WORKERS; i++) cluster.fork();
  process.on('SIGTERM', () => { for (const w of Object.values(cluster.workers)) w.kill('SIGTERM'); process.exit(0); });
} else {
  serve();
}

const text = (data) => ({ content: [{ type: 'text', text: JSON.stringify(data) }] });

function tools(redis) {
  const server = new McpServer({ name: 'BenchmarkNodejsServer', version: '1.0.0' });
  server.registerTool('search_products', {
    description: 'Search products by category and price range, merged with popularity data',
    inputSchema: { category: z.string().default('Electronics'), min_price: z.number().default(50.0),
                   max_price: z.number().default(500.0), limit: z.number().default(10) },
  }, async ({ category, min_price, max_price, limit }) => {
    const params = new URLSearchParams({ category, min_price, max_price, limit });
    const [found, popular] = await Promise.all([
      fetch(`${API}/products/search?${params}`).then((r) => r.json()),
      redis.zrevrange('bench:popular', 0, 9),
    ]);
    const top10 = popular.map((m) => parseInt(m.split(':')[1], 10));
    const rank = Object.fromEntries(top10.map((id, i) => [id, i + 1]));
    const products = (found.products || []).map((p) => ({ id: p.id, sku: p.sku, name: p.name, price: p.price,
      rating: p.rating, popularity_rank: rank[p.id] || 0 }));
    return text({ category, total_found: found.total_found || 0, products, top10_popular_ids: top10, server_type: 'ts-sdk' });
  });
  server.registerTool('get_user_cart', {
    description: 'Get user cart details with recent order history',
    inputSchema: { user_id: z.string().default('user-00042') },
  }, async ({ user_id }) => {
    const cart = await redis.hgetall(`bench:cart:${user_id}`);
    const items = cart?.items ? JSON.parse(cart.items) : [];
    const first = items[0]?.product_id || 1;
    const [, history] = await Promise.all([
      fetch(`${API}/products/${first}`).then((r) => r.json()),
      redis.lrange(`bench:history:${user_id}`, 0, 4),
    ]);
    const recent = history.map((e) => { try { return JSON.parse(e); } catch { return { raw: e }; } });
    return text({ user_id, cart: { items, item_count: items.length, estimated_total: parseFloat(cart?.total || '0') },
                  recent_history: recent, server_type: 'ts-sdk' });
  });
  server.registerTool('checkout', {
    description: 'Process checkout: calculate total, update rate limit, record history',
    inputSchema: { user_id: z.string().default('user-00042'),
                   items: z.array(z.object({ product_id: z.number(), quantity: z.number() }))
                     .default([{ product_id: 42, quantity: 2 }, { product_id: 1337, quantity: 1 }]) },
  }, async ({ user_id, items }) => {
    const n = parseInt(user_id.split('-').pop() || '42', 10);
    const now = Math.floor(Date.now() / 1000);
    const entry = JSON.stringify({ order_id: `ORD-${user_id}-${now}`, items, ts: now });
    const product = items[0]?.product_id || 1;
    const [total, count] = await Promise.all([
      fetch(`${API}/cart/calculate`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                       body: JSON.stringify({ user_id, items }) }).then((r) => r.json()),
      redis.incr(`bench:ratelimit:user-${String(n % 100).padStart(5, '0')}`),
      redis.rpush(`bench:history:${user_id}`, entry),
      redis.zincrby('bench:popular', 1, `product:${product}`),
    ]);
    return text({ order_id: total.order_id || `ORD-${user_id}-${now}`, user_id, total: total.total || 0,
                  items_count: items.length, rate_limit_count: count, status: 'confirmed', server_type: 'ts-sdk' });
  });
  return server;
}

function serve() {
  const redis = new Redis(REDIS, { enableReadyCheck: false, maxRetriesPerRequest: 3 });
  const app = express();
  app.use(express.json());
  app.post('/mcp', async (req, res) => {
    const server = tools(redis);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    try {
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
    } catch (error) {
      if (!res.headersSent) res.status(500).json({ error: String(error) });
    } finally {
      transport.close();
      server.close();
    }
  });
  app.get('/mcp', (req, res) => res.status(405).end());
  app.delete('/mcp', (req, res) => res.status(405).end());
  app.get('/health', (req, res) => res.json({ status: 'ok' }));
  app.listen(PORT, '127.0.0.1');
}

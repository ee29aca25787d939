"""The HTTP JSON API the I/O benchmark's tools call: a product catalogue on loopback.

    python bench/io_api.py PORT

It answers what the public "MCP Server Performance Benchmark v2" api-service answers, with the
same catalogue (100,000 products computed from their index, so nothing is stored):
  GET  /health
  GET  /products/search?category=&min_price=&max_price=&limit=   (cheapest first)
  GET  /products/{id}
  POST /cart/calculate   {"user_id": ..., "items": [{"product_id": ..., "quantity": ...}]}
It should cost little CPU beside the servers under test (they share the machine): asyncio on
uvloop when it is installed, httptools for parsing, msgspec for JSON, and search answers are
kept by query (the benchmark asks the same question again and again).
"""

from __future__ import annotations

import asyncio
import sys
import urllib.parse
from typing import Any

import httptools
import msgspec

CATEGORIES = ["Electronics", "Books", "Clothing", "Sports", "Home", "Garden", "Toys", "Food", "Beauty", "Automotive",
              "Music", "Movies", "Games", "Office", "Health", "Pets", "Travel", "Tools", "Jewelry", "Baby"]
BRANDS = ["Alpha", "Beta", "Gamma", "Delta", "Epsilon", "Zeta", "Eta", "Theta", "Iota", "Kappa", "Lambda", "Mu", "Nu",
          "Xi", "Omicron", "Pi", "Rho", "Sigma", "Tau", "Upsilon", "Phi", "Chi", "Psi", "Omega", "Apex", "Nexus", "Vertex",
          "Zenith", "Nadir", "Flux", "Forge", "Craft", "Build", "Make", "Create", "Design", "Style", "Form", "Shape",
          "Mold", "Cast", "Weld", "Fuse", "Bond", "Link", "Chain", "Wire", "Mesh", "Weave", "Knit"]
TAGS = ["sale", "new", "featured", "bestseller", "clearance", "limited", "popular", "exclusive"]
COUNT = 100_000
encode = msgspec.json.Encoder().encode


class Item(msgspec.Struct):
    product_id: int
    quantity: int


class Cart(msgspec.Struct):
    user_id: str
    items: list[Item]


decode_cart = msgspec.json.Decoder(Cart).decode


def price(i: int) -> float:
    return 1.0 + (i % 99_900) / 100.0


def product(i: int) -> dict[str, Any]:
    """Product ``i + 1`` (``i`` is 0-based), as the reference catalogue builds it."""
    cat, brand = CATEGORIES[i % 20], BRANDS[i % 50]
    return {"id": i + 1, "sku": f"SKU-{i + 1:06d}", "name": f"{brand} {cat} Item {i + 1}", "category": cat,
            "brand": brand, "price": price(i), "stock": i % 501, "rating": round(1.0 + (i % 40) / 10.0, 1),
            "tags": [TAGS[(i + j) % 8] for j in range(2 + i % 3)], "weight": round((1 + i % 100) * 0.1, 2),
            "description": f"Quality {cat} by {brand}. SKU {i + 1:06d}."}


def search(query: str) -> bytes:
    q = dict(urllib.parse.parse_qsl(query))
    category = q.get("category") or "Electronics"
    low = float(q.get("min_price") or 0)
    high = float(q.get("max_price") or 0) or float("inf")
    limit = int(float(q.get("limit") or 0))
    if not 0 < limit <= 1000:
        limit = 10
    if category not in CATEGORIES:
        return encode({"category": category, "total_found": 0, "products": []})
    start = CATEGORIES.index(category)
    matching = sorted((i for i in range(start, COUNT, 20) if low <= price(i) <= high), key=price)
    return encode({"category": category, "total_found": len(matching), "products": [product(i) for i in matching[:limit]]})


def calculate(body: bytes) -> bytes:
    cart = decode_cart(body)
    subtotal = round(sum(price(it.product_id - 1) * it.quantity for it in cart.items if 1 <= it.product_id <= COUNT), 2)
    tax = round(subtotal * 0.085, 2)
    shipping, discount = 5.99, 0.0
    if subtotal >= 100.0:
        discount, shipping = round(subtotal * 0.10, 2), 0.0
    return encode({"order_id": f"ORD-{cart.user_id.replace('-', '')}-{len(cart.items)}", "user_id": cart.user_id,
                   "subtotal": subtotal, "tax": tax, "shipping": shipping, "discount": discount,
                   "total": round(subtotal + tax + shipping - discount, 2), "items_count": len(cart.items)})


class Api(asyncio.Protocol):
    searches: dict[str, bytes] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.body: list[bytes] = []

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            self.transport.close()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        url, body, self.url, self.body = self.url.decode(), b"".join(self.body), b"", []
        path, _, query = url.partition("?")
        method = self.parser.get_method()
        status = "200 OK"
        try:
            if method == b"GET" and path == "/products/search":
                out = self.searches.get(query)
                if out is None:
                    out = search(query)
                    if len(self.searches) < 256:
                        self.searches[query] = out
            elif method == b"GET" and path.startswith("/products/") and path[10:].isdigit() and 1 <= int(path[10:]) <= COUNT:
                out = encode(product(int(path[10:]) - 1))
            elif method == b"POST" and path == "/cart/calculate":
                out = calculate(body)
            elif method == b"GET" and path == "/health":
                out = b'{"status":"ok","server_type":"api-service"}'
            else:
                status, out = "404 Not Found", b'{"error":"not found"}'
        except (msgspec.ValidationError, msgspec.DecodeError, ValueError):
            status, out = "400 Bad Request", b'{"error":"bad request"}'
        self.transport.write(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(out)}\r\n\r\n".encode() + out)
        if not self.parser.should_keep_alive():
            self.transport.close()


async def serve(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(Api, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


def main() -> None:
    port = int(sys.argv[1])
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(port))
    else:
        uvloop.run(serve(port))


if __name__ == "__main__":
    main()

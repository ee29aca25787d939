"""mcpkit's own HTTP/1.1 server (the default ``http_server``): ``listener.HttpServer`` accepts
and keeps the deadlines; the underscored modules are its inside (the state machine without
I/O, the byte movers, the loop of one connection, the request handed to the endpoints)."""

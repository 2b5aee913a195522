"""The chat pages and their websocket: who may see a thread, the views, the socket, its revocation."""

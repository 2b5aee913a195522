"""What the protocol servers (ACP, A2A, AG-UI) share: API tokens, request bodies, the run service."""

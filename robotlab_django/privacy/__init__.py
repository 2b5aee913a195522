"""Users' data over time: retention of inactive threads, erasure of one user's content."""

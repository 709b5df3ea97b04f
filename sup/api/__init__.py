"""The shared HTTP plumbing every API uses: request context and bearer authentication, problem+json
errors, middleware, rate limits, paging and the health endpoints. It imports nothing above it: the
composition root (sup/app.py) wires the feature routers onto it."""

API_PREFIX = "/api/v1"

"""The HTTP layer: FastAPI app, authentication, problem+json errors, middleware, health endpoints."""

API_PREFIX = "/api/v1"

"""Self-service for people with their own OIDC token: /api/v1/me and /api/v1/me/ssh-keys."""

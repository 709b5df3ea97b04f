"""SUP's side of the SSH gateway (docs/ssh-gateway.md): the /api/v1/gateway/* endpoints that
`sup gateway` calls with a token of role `gateway`, and the login pods' wake state.

state.py    the store's wake state (`login_wake`) and the gateway replicas' heartbeats
service.py  routes, wake, heartbeat, events and sessions, over the store and the Kubernetes target
idle.py     the scheduled pass's sleep step: idle pods put to sleep (sup/domain/gateway_idle.py)
router.py   the HTTP endpoints
"""

"""SUP's side of the login pods (docs/ssh-gateway.md): who may reach which pod, whether it is awake,
and the /api/v1/gateway/* endpoints that the jump host (`sup gateway`, sup/gateway) calls with a
token of role `gateway`. Which pods exist is the domain's rule (sup/domain/login_pods.py), the same
one the Kubernetes target renders from.

person.py      one person as the gateway needs them, read from the store
wake_state.py  the store's wake state (`login_wake`) and the gateway replicas' heartbeats
sleep.py       the sleep step: idle pods put to sleep (sup/domain/login_sleep.py), as the planner
               runs it (`SLEEP_STEP`, listed in sup/reconcile/steps.py)
service.py     routes, wake, heartbeat, events and sessions, over the store and the Kubernetes target
router.py      the HTTP endpoints
metrics.py     login pods put to sleep, woken and awake, on `sup serve`'s /metrics
"""

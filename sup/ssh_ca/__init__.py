"""SUP as the cluster's SSH certificate authority: short-lived user certificates
(docs/ssh-certificates.md)."""

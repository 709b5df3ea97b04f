"""Identity sources SUP pulls from (Keycloak); pushing sources (SCIM) live in sup/scim."""

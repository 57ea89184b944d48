//! Issue 22, plans: only declared upstreams, no forwarded credential, nesting and size bounded, secrets redacted (findings 1, 4, 7, 8, 10).

//! Issue 22, token scopes and the Redis store read defensively (finding 12, scopes).

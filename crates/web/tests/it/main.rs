//! weir-web over a real socket: a scheduler on the memory store, a tool of
//! the test's own, the routes behind the guard with three named
//! credentials (alice, bob, and root, an admin), driven by an HTTP client
//! — what each caller sees and may do (`api`), and the page's static files
//! and the guard's refusals (`page`).

mod api;
mod page;
mod support;

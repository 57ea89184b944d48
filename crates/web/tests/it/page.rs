//! The page's static files need no token (a browser following a link
//! cannot send one) but pass the `Host` and `Origin` checks; everything
//! else needs the token.

use crate::support::Server;

#[tokio::test]
async fn the_page_loads_without_a_token_and_the_api_needs_one() {
    let server = Server::start().await;
    for (path, kind) in [
        ("/", "text/html"),
        ("/assets/app.js", "text/javascript"),
        ("/assets/graph.js", "text/javascript"),
        ("/assets/app.css", "text/css"),
    ] {
        let response = server
            .http
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let content_type = response.headers()["content-type"].to_str().unwrap();
        assert!(content_type.starts_with(kind), "{path}: {content_type}");
        assert!(response.headers().contains_key("content-security-policy"));
    }
    let page = server
        .http
        .get(format!("{}/", server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("/assets/app.js"), "{page}");
    // No CDN: every script and style is the server's own.
    assert!(!page.contains("://"), "{page}");

    for path in [
        "/api/runs",
        "/api/runs/live",
        "/api/tools",
        "/assets/none.js",
    ] {
        let response = server
            .http
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .unwrap();
        let expected = if path == "/assets/none.js" { 404 } else { 401 };
        assert_eq!(response.status(), expected, "{path}");
    }
    let response = server
        .http
        .get(format!("{}/api/runs", server.base))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
}

#[tokio::test]
async fn the_page_is_refused_to_a_foreign_host_or_origin() {
    let server = Server::start().await;
    let foreign_host = server
        .http
        .get(format!("{}/", server.base))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign_host.status(), 403);
    let foreign_origin = server
        .http
        .get(format!("{}/", server.base))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign_origin.status(), 403);
}

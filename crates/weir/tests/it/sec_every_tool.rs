//! Issue 22, every registered tool, every string field: no path, URL or command a caller sends reaches the host.

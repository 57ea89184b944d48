//! Issue 22, llms.txt: sources inside a root, no clone of an undeclared address, a bounded model client (findings 5, 11).

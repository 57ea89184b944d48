//! Issue 22, the code intelligence tools: roots, a hostile repository, SCIP paths (findings 2, 9, 11).

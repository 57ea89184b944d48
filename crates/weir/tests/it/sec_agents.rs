//! Issue 22, the agent tools: cwd inside a root, no argument becomes a flag (findings 3, 6).

//! Tool-argument validation (spec tools.md §0.2). Implemented by the tools work.

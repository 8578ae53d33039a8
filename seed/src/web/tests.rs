//! Unit tests of the web API: path groups, paging, RID forms, diffs, content types.

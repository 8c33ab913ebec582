//! Tests only (tests/links.rs, tests/readme.rs): the documentation checked against the
//! repository and the real servers.

//! The README's metric table equal to the catalog.

use crate::root;
use pipeline_common::catalog;

const BEGIN: &str = "<!-- metrics:begin (generated from services/common/src/catalog.rs by compose/check; UPDATE_README=1 cargo test -p compose-check --test compose readme rewrites it) -->";
const END: &str = "<!-- metrics:end -->";

fn metric_table() -> String {
    let mut s = String::from("| metric | type | meaning |\n|---|---|---|\n");
    for (kind, name, help) in catalog::ALL {
        s.push_str(&format!("| `{name}` | {kind} | {} |\n", help.replace('|', "\\|")));
    }
    s
}

#[test]
fn readme_metric_table_is_the_catalog() {
    let path = root().join("README.md");
    let text = std::fs::read_to_string(&path).expect("README.md");
    let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
        panic!("README.md has no generated metric table (lines {BEGIN} … {END})");
    };
    let current = &text[b + BEGIN.len()..e];
    let want = format!("\n{}", metric_table());
    if current != want {
        if std::env::var_os("UPDATE_README").is_some() {
            let new = format!("{}{BEGIN}{want}{}", &text[..b], &text[e..]);
            std::fs::write(&path, new).expect("write README.md");
            println!("README.md metric table rewritten from the catalog");
        } else {
            panic!(
                "README.md's metric table differs from services/common/src/catalog.rs; \
                 run `UPDATE_README=1 cargo test -p compose-check --test compose readme`"
            );
        }
    }
}

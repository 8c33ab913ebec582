//! The reference pages the code holds the truth of, rendered as Markdown: each binary's flags
//! from its clap definition (docs/reference/configuration.md). Each crate's drift test renders
//! its own part and compares it with the committed page (`pipeline_testkit::docs`).

use clap::Command;

/// One table per command and subcommand: every flag with its environment variable, default and
/// help, in the order clap lists them (`--help` and `--version` left out).
pub fn flags_markdown(cmd: &Command) -> String {
    let mut out = String::new();
    render(cmd, &mut Vec::new(), true, &mut out);
    out
}

/// The command's own flags only, without its subcommands.
pub fn top_flags_markdown(cmd: &Command) -> String {
    let mut out = String::new();
    render(cmd, &mut Vec::new(), false, &mut out);
    out
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn render(cmd: &Command, path: &mut Vec<String>, deep: bool, out: &mut String) {
    path.push(cmd.get_name().to_string());
    let title = path.join(" ");
    if path.len() > 1 {
        out.push_str(&format!("\n#### `{title}`\n\n"));
    }
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        out.push_str(&format!("{}\n\n", about.to_string().trim()));
    }
    let args: Vec<_> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !["help", "version"].contains(&a.get_id().as_str()))
        .collect();
    if !args.is_empty() {
        out.push_str("| flag | environment | default | what it does |\n|---|---|---|---|\n");
        for a in args {
            let flag = match (a.get_long(), a.is_positional()) {
                (_, true) => format!(
                    "`<{}>`",
                    a.get_value_names().and_then(|v| v.first()).map_or(a.get_id().as_str(), |v| v.as_str())
                ),
                (Some(l), _) => format!("`--{l}`"),
                (None, _) => format!("`-{}`", a.get_short().unwrap_or('?')),
            };
            let env = a.get_env().map_or(String::new(), |e| format!("`{}`", e.to_string_lossy()));
            let defaults: Vec<String> =
                a.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
            let default = if defaults.is_empty() || defaults.iter().all(String::is_empty) {
                String::new()
            } else {
                format!("`{}`", defaults.join(","))
            };
            let help = a.get_long_help().or(a.get_help()).map_or(String::new(), |h| h.to_string());
            out.push_str(&format!("| {flag} | {env} | {} | {} |\n", cell(&default), cell(help.trim())));
        }
    }
    for sub in cmd.get_subcommands().filter(|s| deep && !s.is_hide_set() && s.get_name() != "help") {
        render(sub, path, deep, out);
    }
    path.pop();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_has_its_row() {
        let cmd = Command::new("demo")
            .about("Demo")
            .arg(clap::Arg::new("speed").long("speed").env("DEMO_SPEED").default_value("3").help("How fast | really"))
            .subcommand(Command::new("run").about("Runs").arg(clap::Arg::new("file").help("The file")));
        let md = flags_markdown(&cmd);
        assert!(md.contains("| `--speed` | `DEMO_SPEED` | `3` | How fast \\| really |"), "{md}");
        assert!(md.contains("#### `demo run`"), "{md}");
        assert!(md.contains("| `<file>` |  |  | The file |"), "{md}");
    }
}

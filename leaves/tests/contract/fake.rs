//! The fake agent CLIs: this test binary, re-executed through a script put first on
//! `PATH`, records how it was called and replays a recorded stream.

use std::collections::BTreeMap;
use std::io::Read;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

/// `__fake-cli <name> <scenario> <sandbox> <args...>`.
pub fn run(args: &[String]) -> i32 {
    let (Some(name), Some(scenario), Some(sandbox)) = (args.first(), args.get(1), args.get(2))
    else {
        return 90;
    };
    let argv = &args[3..];
    if argv == ["--version"] {
        // As the real CLI prints it, from the manifest (`tdd` reads it before a leaf).
        let printed = version(name).unwrap_or_else(|| "0.0.0".into());
        let _ = writeln!(std::io::stdout(), "{printed}");
        return 0;
    }
    let sandbox = PathBuf::from(sandbox);
    let mut stdin = String::new();
    let _ = std::io::stdin().read_to_string(&mut stdin);
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let env_text: String = env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    let _ = std::fs::write(sandbox.join("env.txt"), env_text);
    let call = serde_json::json!({ "name": name, "argv": argv, "stdin": stdin,
        "cwd": std::env::current_dir().ok() });
    let _ = std::fs::write(sandbox.join("call.json"), call.to_string());
    let lines = match recorded(name, scenario) {
        Some(text) => {
            let session = argv
                .iter()
                .position(|a| a == "--session-id")
                .and_then(|i| argv.get(i + 1))
                .cloned()
                .unwrap_or_else(|| "no-session".into());
            text.replace("{{session_id}}", &session)
        }
        // A CLI with no recording (the `command` provider's agent) says what it did.
        None => format!(
            "done as {}\n",
            env.get("TDD_ROLE").map_or("?", String::as_str)
        ),
    };
    let mut out = std::io::stdout();
    let _ = out.write_all(lines.as_bytes());
    let _ = out.flush();
    match scenario.as_str() {
        "ok" => 0,
        "crash" => 1,
        _ => loop {
            std::thread::park();
        },
    }
}

/// The version the manifest says this CLI's recordings come from.
fn version(name: &str) -> Option<String> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let manifest: toml::Table = std::fs::read_to_string(fixtures.join("manifest.toml"))
        .ok()?
        .parse()
        .ok()?;
    Some(manifest.get(name)?.get("version")?.as_str()?.to_string())
}

/// The recorded stream the manifest names for this CLI and scenario.
fn recorded(name: &str, scenario: &str) -> Option<String> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let manifest: toml::Table = std::fs::read_to_string(fixtures.join("manifest.toml"))
        .ok()?
        .parse()
        .ok()?;
    let file = manifest.get(name)?.get(scenario)?.as_str()?;
    std::fs::read_to_string(fixtures.join(file)).ok()
}

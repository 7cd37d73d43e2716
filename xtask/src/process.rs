//! Running child commands with a clear message when they fail.

use std::process::Command;

use crate::Result;

/// Runs `command` to completion, inheriting stdio; fails naming the command.
pub fn run(command: &mut Command) -> Result<()> {
    let shown = describe(command);
    println!("+ {shown}");
    let status = command
        .status()
        .map_err(|error| format!("could not start `{shown}`: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{shown}` failed with {status}"))
    }
}

/// The program and arguments of `command`, for messages.
pub fn describe(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|part| part.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `command` to completion and returns what it printed; fails naming
/// the command, with its standard error.
pub fn output(command: &mut Command) -> Result<String> {
    let shown = describe(command);
    let output = command.output();
    let output = output.map_err(|error| format!("could not start `{shown}`: {error}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "`{shown}` failed with {}: {}",
            output.status,
            stderr.trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

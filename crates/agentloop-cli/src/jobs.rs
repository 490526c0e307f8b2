//! Background jobs in the CLI: the `job_started` / `job_finished` lines of `--json` (a short
//! stderr line otherwise), the `/jobs` listing in chat, and the table's settings from the flags
//! (`--keep-jobs`). The jobs themselves (start, output, kill) live in the library's built-in
//! tools; the CLI kills the ones still running when a run ends and on every exit path through
//! `kill_shell_processes`, which leaves kept jobs alone.

use agentloop::builtin::{JobEvent, JobInfo, JobStatus, Jobs};
use serde_json::{Value, json};

use crate::ui::safe_text::visible_line;

/// The job table for one `run` or one whole `chat` conversation.
pub fn table(keep: bool) -> Jobs {
    Jobs::new().keep_after_run(keep)
}

/// Shows every job start and end: a JSON line with `--json`, else a line on stderr.
pub fn announce(jobs: &Jobs, json: bool) {
    jobs.on_event(move |event| {
        if json {
            if let Some(line) = event_line(event) {
                crate::ui::render::out(&format!("{line}\n"));
            }
            return;
        }
        let line = match event {
            JobEvent::Started(job) => format!("job {} started: {}", job.id, command(job)),
            JobEvent::Finished(job) => {
                format!("job {} finished ({}): {}", job.id, job.status, command(job))
            }
            _ => return,
        };
        eprintln!("agentloop: {line}");
    });
}

fn command(job: &JobInfo) -> String {
    crate::ui::render::one_line(&visible_line(&job.command), 80)
}

/// The `--json` line of a job event (see `schema/events.schema.json`).
fn event_line(event: &JobEvent) -> Option<Value> {
    match event {
        JobEvent::Started(job) => Some(json!({
            "type": "job_started",
            "job": job.id,
            "command": job.command,
            "call_id": job.call_id,
        })),
        JobEvent::Finished(job) => {
            let (status, code, signal) = match job.status {
                JobStatus::Exited(code) => ("exited", Some(code), None),
                JobStatus::Signaled(signal) => ("signaled", None, Some(signal)),
                _ => ("killed", None, None),
            };
            Some(json!({
                "type": "job_finished",
                "job": job.id,
                "command": job.command,
                "call_id": job.call_id,
                "status": status,
                "exit_code": code,
                "signal": signal,
            }))
        }
        _ => None,
    }
}

/// `/jobs`: one line per job (id, running or how it ended, command), or a note when none.
pub fn listing(jobs: &Jobs) -> String {
    let all = jobs.list();
    if all.is_empty() {
        return "(no background jobs yet; the model starts one with shell and \"background\": \
                true)\n"
            .to_owned();
    }
    all.iter()
        .map(|job| {
            format!(
                "{:>3}  {:<16}  {}\n",
                job.id,
                job.status.to_string(),
                command(job)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_table_lists_a_note() {
        assert!(listing(&table(false)).starts_with("(no background jobs yet"));
    }
}

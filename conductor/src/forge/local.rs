//! The local forge: the thread and the draft PR as markdown files.

use std::path::Path;
use std::path::PathBuf;

use tdd_prompts::Issue;

use super::Forge;
use super::ForgeError;
use crate::events::CommentPosted;
use crate::events::ConductorEvent;
use crate::events::PrOpened;
use crate::journal::Journal;

/// A forge on local files: `thread.md` (the issue and its comments, in order of
/// first posting) and `pr.md` in the conduct run's directory.
#[derive(Debug)]
pub struct LocalForge {
    issue_path: PathBuf,
    dir: PathBuf,
    journal: Journal,
}

impl LocalForge {
    /// The local forge of the issue file at `issue_path`, writing into `dir`.
    pub fn new(issue_path: &Path, dir: &Path, journal: Journal) -> LocalForge {
        LocalForge {
            issue_path: issue_path.to_path_buf(),
            dir: dir.to_path_buf(),
            journal,
        }
    }

    /// The thread file.
    pub fn thread_path(&self) -> PathBuf {
        self.dir.join("thread.md")
    }

    /// The draft PR file.
    pub fn pr_path(&self) -> PathBuf {
        self.dir.join("pr.md")
    }

    fn write(&self, path: &Path, text: &str) -> Result<(), ForgeError> {
        let err = |source| ForgeError::Write {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(err)?;
        }
        // Write then rename, so a crash never leaves half a file.
        let tmp = path.with_extension("md.tmp");
        std::fs::write(&tmp, text).map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)
    }

    fn render_thread(&self) -> Result<(), ForgeError> {
        let issue = self.issue()?;
        let mut text = format!(
            "# #{} {}\n\n{}\n",
            issue.number(),
            issue.title(),
            issue.body()
        );
        for posted in self.journal.comments_posted()? {
            let id = posted.id;
            let body = std::fs::read_to_string(self.dir.join("comments").join(format!("{id}.md")))
                .unwrap_or_default();
            text.push_str(&format!("\n---\n<!-- comment {id} -->\n{body}\n"));
        }
        self.write(&self.thread_path(), &text)
    }
}

impl Forge for LocalForge {
    fn issue(&self) -> Result<Issue, ForgeError> {
        Ok(crate::issue::read_local(&self.issue_path)?)
    }

    fn comment(&self, key: &str, body: &str) -> Result<String, ForgeError> {
        let posted = self.journal.comments_posted()?;
        let known = posted.iter().find(|p| p.key == key);
        let id = known.map_or_else(|| format!("c{}", posted.len() + 1), |p| p.id.clone());
        // Recorded once written: a comment that never reached the forge is not in the
        // thread, and a crash in between writes the same id again.
        self.write(&self.dir.join("comments").join(format!("{id}.md")), body)?;
        if known.is_none() {
            self.journal
                .record(&ConductorEvent::CommentPosted(CommentPosted {
                    key: key.to_string(),
                    id: id.clone(),
                }))?;
        }
        self.render_thread()?;
        Ok(id)
    }

    fn open_or_update_draft_pr(
        &self,
        branch: &str,
        title: &str,
        body: &str,
    ) -> Result<String, ForgeError> {
        let text = format!("<!-- draft PR: {branch} -->\n# {title}\n\n{body}");
        self.write(&self.pr_path(), &text)?;
        // Recorded once written, like a comment.
        if !self.journal.pr_opened()? {
            self.journal.record(&ConductorEvent::PrOpened(PrOpened {
                branch: branch.to_string(),
                path: Some(self.pr_path()),
                number: None,
                url: None,
            }))?;
        }
        Ok(self.pr_path().display().to_string())
    }

    fn pr_location(&self) -> String {
        self.pr_path().display().to_string()
    }
}

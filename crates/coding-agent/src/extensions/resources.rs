//! Skills and prompt templates the extensions' `resources_discover` handlers add
//! ([`Extensions::discover_resources`]).

use super::wire::{self, ToHost};
use super::Extensions;
use std::path::{Path, PathBuf};

/// What [`Extensions::discover_resources`] found: skill files and prompt template files, each
/// with the `sourceInfo` upstream gives it (`source: "extension:<name>"`).
#[derive(Debug, Clone, Default)]
pub struct Discovered {
    /// Skill files.
    pub skills: Vec<crate::packages::PackageResource>,
    /// Prompt template files.
    pub prompts: Vec<crate::packages::PackageResource>,
}

impl Extensions {
    /// Runs the `resources_discover` handlers (upstream docs/extensions.md: after
    /// `session_start`; `reason` `startup` or `reload`) and makes the skills and prompt
    /// templates they name part of the session's resources (`get_commands`, the system
    /// prompt's skills, `/skill:` and template expansion). A folder gives the files discovery
    /// finds in it; relative paths resolve against `cwd`. Each file's `sourceInfo`:
    /// `{path, source: "extension:<entry file stem>", scope: "temporary", origin: "top-level",
    /// baseDir: <the entry file's folder>}`, as upstream reports them.
    pub async fn discover_resources(&self, cwd: &Path, reason: &str) {
        const EVENT: &str = "resources_discover";
        if !self.handles(EVENT) || self.host.is_dead() {
            return;
        }
        self.push_state();
        let id = self.host.next_id();
        let msg = ToHost::Event {
            id: Some(id),
            event: wire::Notification::ResourcesDiscover(wire::ResourcesDiscoverEvent {
                cwd: &cwd.to_string_lossy(),
                reason,
            }),
        };
        let found: Vec<wire::DiscoveredResources> =
            match self.host.request(id, &msg, Some(self.hook_timeout)).await {
                Ok(v) => serde_json::from_value(v).unwrap_or_default(),
                Err(e) => {
                    for p in self.handlers_of(EVENT) {
                        self.error(&p, EVENT, &e.to_string());
                    }
                    vec![]
                }
            };
        let mut out = Discovered::default();
        for f in &found {
            let entry = Path::new(&f.path);
            let name = entry
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let base = entry.parent().map(|p| p.to_string_lossy().into_owned());
            let resource = |file: PathBuf| crate::packages::PackageResource {
                info: crate::resources::SourceInfo {
                    path: file.to_string_lossy().into_owned(),
                    source: format!("extension:{name}"),
                    scope: "temporary".into(),
                    origin: "top-level".into(),
                    base_dir: base.clone(),
                    changelog_path: None,
                },
                path: file,
            };
            let files = |p: &String, dir_files: &dyn Fn(&Path) -> Vec<PathBuf>| {
                let p = cwd.join(p);
                if p.is_dir() {
                    dir_files(&p)
                } else {
                    vec![p]
                }
            };
            use crate::resources::discover::{collect_prompt_entries, collect_skill_entries};
            let skills =
                |d: &Path| collect_skill_entries(d, crate::resources::discover::SkillMode::Pi);
            for p in &f.skill_paths {
                out.skills
                    .extend(files(p, &skills).into_iter().map(resource));
            }
            for p in &f.prompt_paths {
                out.prompts
                    .extend(files(p, &collect_prompt_entries).into_iter().map(resource));
            }
        }
        self.rebuild_loadout(|| {
            *self.discovered.write() = out;
            vec![]
        });
    }

    /// The skills and prompt templates `resources_discover` handlers added.
    pub fn discovered(&self) -> Discovered {
        self.discovered.read().clone()
    }
}

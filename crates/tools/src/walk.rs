//! The directory walk shared by `grep` and `find` (spec tools.md §5, §6): the first `limit`
//! results in **sorted walk order**, found in parallel.
//!
//! Sorted walk order is the order of a pre-order walk whose siblings are sorted by file name
//! byte-wise (`WalkBuilder::sort_by_file_name`); it equals [`Path`]'s own order (component by
//! component, byte-wise), so results found in any order can be sorted into it afterwards. A
//! result is a path plus an item that orders results at the same path (grep: line number and
//! text; find: whether it is a directory).
//!
//! How the walk goes:
//! 1. The sorted sequential walk runs first, while its entries' cost (grep: files searched;
//!    find: entries visited) stays within a budget. A search whose limit is reached in that
//!    stretch is over there: its results are the first ones in sorted order by construction.
//! 2. Otherwise the `ignore` crate's parallel walker (one thread per available core, at most
//!    12, as ripgrep and fd use) takes over *where the sequential walk stopped*: the first
//!    entry it did not process is the resume point, and every entry before it in sorted order
//!    has been processed, so the parallel walk keeps only entries at or after it plus its
//!    ancestors (directories it must pass through, not processed again). Entries are pruned
//!    in the walker's entry filter, before their directory is read or its ignore files loaded.
//! 3. Once `limit` results are known, their largest path is a bound: an entry whose path sorts
//!    after it cannot hold one of the first `limit` results, nor can anything below it (a
//!    directory sorts before its contents, and everything in it sorts after it), so it is
//!    pruned. The walk ends when no entry at or before the bound is left, i.e. as soon as the
//!    first `limit` results in sorted order are certain; it cannot end sooner, because the
//!    parallel walker gives no order, so an entry not yet visited may still sort first.
//!
//! The result is what a sequential sorted walk stopping at the `limit`-th result returns.

use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};
use pi_agent::ToolError;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use tokio_util::sync::CancellationToken;

/// One result of a search: the path of the entry it was found at, and what orders results at
/// the same path.
pub(crate) type Found<T> = (PathBuf, T);

/// What a search does at the entries of the walk.
pub(crate) trait Search: Sync {
    /// What orders results at the same path (e.g. a line number first).
    type Item: Ord + Send + 'static;
    /// Per-thread state (e.g. a grep searcher with its buffers).
    type State: Send + 'static;

    /// A fresh per-thread state.
    fn new_state(&self) -> Self::State;

    /// How much of the sequential walk's budget `entry` uses (0 = free).
    fn cost(&self, entry: &DirEntry) -> usize;

    /// Appends the results found at `entry` to `out`, at most `room` of them (≥ 1), in their
    /// item order.
    fn visit(
        &self,
        state: &mut Self::State,
        entry: DirEntry,
        room: usize,
        out: &mut Vec<Found<Self::Item>>,
    );
}

/// An entry filter of the walk (true = keep the entry and, for a directory, walk into it).
pub(crate) type EntryFilter = Arc<dyn Fn(&DirEntry) -> bool + Send + Sync>;

/// Threads of the parallel walk: the available cores, at most 12 (ripgrep's and fd's default).
pub(crate) fn walk_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(12)
}

/// The first `limit` (≥ 1) results of `search` over `walk` in sorted walk order (module
/// docs). `walk` carries the ignore rules; this sets its sorting, entry filter and threads.
/// `filter` drops entries (and their subtrees) before anything else; `budget` is the cost the
/// sequential walk may spend before the parallel walk takes over.
///
/// Errors: [`ToolError::Aborted`] once `cancel` fires (checked at every entry).
pub(crate) fn first_in_walk_order<S: Search>(
    walk: &mut WalkBuilder,
    filter: Option<EntryFilter>,
    search: &S,
    limit: usize,
    budget: usize,
    cancel: &CancellationToken,
) -> Result<Vec<Found<S::Item>>, ToolError> {
    let limit = limit.max(1);
    if let Some(f) = filter.clone() {
        walk.filter_entry(move |e| f(e));
    }
    walk.sort_by_file_name(std::cmp::Ord::cmp);

    let mut found: Vec<Found<S::Item>> = Vec::new();
    let mut state = search.new_state();
    let mut spent = 0usize;
    let mut resume: Option<PathBuf> = None;
    for entry in walk.build() {
        check_aborted(cancel)?;
        let Ok(entry) = entry else { continue };
        let cost = search.cost(&entry);
        if cost > 0 && spent.saturating_add(cost) > budget {
            resume = Some(entry.into_path());
            break;
        }
        spent += cost;
        search.visit(&mut state, entry, limit - found.len(), &mut found);
        if found.len() >= limit {
            found.truncate(limit);
            return Ok(found);
        }
    }
    drop(state);
    let Some(resume) = resume else {
        return Ok(found);
    };

    let gathered = Arc::new(Gathered::new(limit, found));
    let resume = Arc::new(resume);
    {
        let gathered = Arc::clone(&gathered);
        let resume = Arc::clone(&resume);
        walk.filter_entry(move |e| {
            if let Some(f) = &filter {
                if !f(e) {
                    return false;
                }
            }
            let path = e.path();
            // Before the resume point and not on the way to it: processed already.
            if path < resume.as_path() && !resume.starts_with(path) {
                return false;
            }
            !gathered.beyond(path)
        });
    }
    walk.threads(walk_threads());
    let mut builder = Builder {
        search,
        gathered: &gathered,
        resume: &resume,
        cancel,
        limit,
    };
    walk.build_parallel().visit(&mut builder);
    check_aborted(cancel)?;
    Ok(gathered.take())
}

fn check_aborted(cancel: &CancellationToken) -> Result<(), ToolError> {
    if cancel.is_cancelled() {
        Err(ToolError::Aborted)
    } else {
        Ok(())
    }
}

/// Results gathered by the parallel walk's threads, and the bound past which entries are
/// pruned (module docs, step 3).
struct Gathered<T> {
    limit: usize,
    items: Mutex<Vec<Found<T>>>,
    /// Whether `bound` is set (read without a lock on every entry).
    bounded: AtomicBool,
    /// Once `limit` results are known: the path of the `limit`-th smallest.
    bound: RwLock<Option<PathBuf>>,
}

impl<T: Ord> Gathered<T> {
    /// Starts from `items` (sorted, fewer than `limit`).
    fn new(limit: usize, items: Vec<Found<T>>) -> Self {
        Gathered {
            limit,
            items: Mutex::new(items),
            bounded: AtomicBool::new(false),
            bound: RwLock::new(None),
        }
    }

    /// Whether an entry at `path` can no longer hold one of the first `limit` results.
    fn beyond(&self, path: &Path) -> bool {
        if !self.bounded.load(Ordering::Acquire) {
            return false;
        }
        let bound = self
            .bound
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        bound.as_deref().is_some_and(|b| path > b)
    }

    /// Adds results found by one thread (emptying `found`).
    fn add(&self, found: &mut Vec<Found<T>>) {
        let mut items = self
            .items
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        items.append(found);
        // Settled the first time `limit` results are known, then whenever they have doubled,
        // so the bound tightens while sorting stays amortised O(log n) per result.
        let due = if self.bounded.load(Ordering::Acquire) {
            self.limit.saturating_mul(2)
        } else {
            self.limit
        };
        if items.len() >= due {
            settle(&mut items, self.limit);
            if let Some((last, _)) = items.last() {
                let mut bound = self
                    .bound
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                *bound = Some(last.clone());
                self.bounded.store(true, Ordering::Release);
            }
        }
    }

    /// The first `limit` results in sorted walk order.
    fn take(&self) -> Vec<Found<T>> {
        let mut items = self
            .items
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut items = std::mem::take(&mut *items);
        settle(&mut items, self.limit);
        items
    }
}

/// Sorts `items` into sorted walk order and keeps the first `limit`.
fn settle<T: Ord>(items: &mut Vec<Found<T>>, limit: usize) {
    items.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    items.truncate(limit);
}

/// Results a thread keeps to itself before adding them to [`Gathered`] when the limit is
/// large (pruning then starts late anyway, and the shared lock is taken less often).
const LOCAL_BATCH: usize = 512;

struct Builder<'a, S: Search> {
    search: &'a S,
    gathered: &'a Gathered<S::Item>,
    resume: &'a Path,
    cancel: &'a CancellationToken,
    limit: usize,
}

impl<'s, S: Search> ParallelVisitorBuilder<'s> for Builder<'s, S> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(Visitor {
            search: self.search,
            state: self.search.new_state(),
            gathered: self.gathered,
            resume: self.resume,
            cancel: self.cancel,
            limit: self.limit,
            // A small limit makes the bound worth knowing at once.
            batch: if self.limit <= LOCAL_BATCH {
                1
            } else {
                LOCAL_BATCH
            },
            local: Vec::new(),
        })
    }
}

struct Visitor<'a, S: Search> {
    search: &'a S,
    state: S::State,
    gathered: &'a Gathered<S::Item>,
    resume: &'a Path,
    cancel: &'a CancellationToken,
    limit: usize,
    batch: usize,
    local: Vec<Found<S::Item>>,
}

impl<S: Search> ParallelVisitor for Visitor<'_, S> {
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        if self.cancel.is_cancelled() {
            return WalkState::Quit;
        }
        let Ok(entry) = entry else {
            return WalkState::Continue;
        };
        // The root and the resume point's other ancestors were processed by the sequential
        // walk; the walk only passes through them.
        if entry.path() < self.resume {
            return WalkState::Continue;
        }
        // Queued before the bound was known (the entry filter prunes everything after).
        if self.gathered.beyond(entry.path()) {
            return WalkState::Skip;
        }
        self.search
            .visit(&mut self.state, entry, self.limit, &mut self.local);
        if self.local.len() >= self.batch {
            self.gathered.add(&mut self.local);
        }
        WalkState::Continue
    }
}

impl<S: Search> Drop for Visitor<'_, S> {
    fn drop(&mut self) {
        if !self.local.is_empty() {
            self.gathered.add(&mut self.local);
        }
    }
}

//! Steering and follow-up queues (spec agent-loop.md §4, rpc-protocol.md §5.4).
//!
//! Two views of each queue, as upstream keeps them:
//! * the *agent queue*: messages the loop drains at its delivery points, respecting the mode;
//! * the *shown list*: the texts `queue_update` reports. An item leaves it when the delivered
//!   user message's `message_start` is emitted (matched by text, steering first, then
//!   follow-up), so `queue_update` comes right before the delivered message, after
//!   `turn_start` (golden `queue_update_steer_follow_up`).

use crate::protocol::rpc::QueueTexts;
use pi_ai::Message;
use serde_json::Value;
use std::collections::VecDeque;

/// Which queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    /// Delivered after the current turn's tool calls (`steer`).
    Steering,
    /// Delivered when the agent would otherwise stop (`follow_up`).
    FollowUp,
}

/// The wire value of the default mode.
pub const ONE_AT_A_TIME: &str = "one-at-a-time";

/// The only mode value that delivers every queued message at once.
pub const ALL: &str = "all";

/// Both queues and their delivery modes.
#[derive(Debug, Default)]
pub struct MessageQueues {
    steering: VecDeque<Message>,
    follow_up: VecDeque<Message>,
    shown: QueueTexts,
    steering_mode: Value,
    follow_up_mode: Value,
}

/// The text a queued message is shown (and matched) by: its text blocks joined.
pub fn message_text(m: &Message) -> String {
    match m {
        Message::User(u) => u.content.joined_text(),
        _ => String::new(),
    }
}

impl MessageQueues {
    /// Empty queues with the given modes (any JSON value; see [`MessageQueues::set_mode`]).
    pub fn new(steering_mode: Value, follow_up_mode: Value) -> Self {
        MessageQueues {
            steering_mode,
            follow_up_mode,
            ..Default::default()
        }
    }

    /// The mode as set: `"all"`, `"one-at-a-time"` or whatever a client sent.
    pub fn mode(&self, kind: QueueKind) -> &Value {
        match kind {
            QueueKind::Steering => &self.steering_mode,
            QueueKind::FollowUp => &self.follow_up_mode,
        }
    }

    /// Sets a mode. Upstream 1.6 stores any value as sent; only exactly `"all"` delivers all
    /// queued messages at once, anything else one at a time (observed on upstream 1.6; the
    /// spec's inferred opposite, rpc-protocol.md §4.5, is wrong).
    pub fn set_mode(&mut self, kind: QueueKind, mode: Value) {
        match kind {
            QueueKind::Steering => self.steering_mode = mode,
            QueueKind::FollowUp => self.follow_up_mode = mode,
        }
    }

    /// Queues a message; returns the shown lists for `queue_update`.
    pub fn push(&mut self, kind: QueueKind, message: Message) -> QueueTexts {
        let text = message_text(&message);
        match kind {
            QueueKind::Steering => {
                self.steering.push_back(message);
                self.shown.steering.push(text);
            }
            QueueKind::FollowUp => {
                self.follow_up.push_back(message);
                self.shown.follow_up.push(text);
            }
        }
        self.shown.clone()
    }

    /// The messages waiting in both queues (steering first), without taking them.
    pub fn pending(&self) -> Vec<Message> {
        self.steering
            .iter()
            .chain(self.follow_up.iter())
            .cloned()
            .collect()
    }

    /// Takes what the loop delivers now: all for mode `"all"`, else one message. The shown lists are unchanged until [`MessageQueues::delivered`].
    pub fn drain(&mut self, kind: QueueKind) -> Vec<Message> {
        let one = self.mode(kind).as_str() != Some(ALL);
        let q = match kind {
            QueueKind::Steering => &mut self.steering,
            QueueKind::FollowUp => &mut self.follow_up,
        };
        if one {
            q.pop_front().into_iter().collect()
        } else {
            q.drain(..).collect()
        }
    }

    /// A user message with this text is being delivered: removes its first shown occurrence
    /// (steering first, then follow-up) and returns the new lists, or `None` when it was not
    /// a queued message.
    pub fn delivered(&mut self, text: &str) -> Option<QueueTexts> {
        let found = [&mut self.shown.steering, &mut self.shown.follow_up]
            .into_iter()
            .find_map(|list| {
                let pos = list.iter().position(|t| t == text)?;
                list.remove(pos);
                Some(())
            });
        found.map(|()| self.shown.clone())
    }

    /// Empties both queues; returns the removed texts (`clear_queue`).
    pub fn clear(&mut self) -> QueueTexts {
        self.steering.clear();
        self.follow_up.clear();
        std::mem::take(&mut self.shown)
    }

    /// Steering + follow-up messages still pending (`pendingMessageCount`).
    pub fn pending_count(&self) -> usize {
        self.shown.steering.len() + self.shown.follow_up.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_ai::{Content, UserContent, UserMessage};

    fn user(t: &str) -> Message {
        Message::User(UserMessage {
            content: UserContent::Blocks(vec![Content::text(t)]),
            timestamp: 0,
            extra: Default::default(),
        })
    }

    #[test]
    fn one_at_a_time_and_delivery_updates_shown_lists() {
        let mut q = MessageQueues::new(ONE_AT_A_TIME.into(), ONE_AT_A_TIME.into());
        q.push(QueueKind::Steering, user("a"));
        q.push(QueueKind::Steering, user("b"));
        let shown = q.push(QueueKind::FollowUp, user("c"));
        assert_eq!(shown.steering, vec!["a", "b"]);
        assert_eq!(q.drain(QueueKind::Steering).len(), 1);
        assert_eq!(q.pending_count(), 3, "drained but not yet delivered");
        let after = q.delivered("a").unwrap();
        assert_eq!(after.steering, vec!["b"]);
        assert_eq!(after.follow_up, vec!["c"]);
        assert!(q.delivered("zzz").is_none());
    }

    #[test]
    fn only_all_delivers_all() {
        let mut q = MessageQueues::new("bogus".into(), ALL.into());
        for t in ["a", "b"] {
            q.push(QueueKind::Steering, user(t));
            q.push(QueueKind::FollowUp, user(t));
        }
        assert_eq!(
            q.drain(QueueKind::Steering).len(),
            1,
            "unknown mode: one at a time"
        );
        assert_eq!(q.mode(QueueKind::Steering), "bogus");
        assert_eq!(q.drain(QueueKind::FollowUp).len(), 2);
        q.set_mode(QueueKind::Steering, Value::from(5));
        assert_eq!(q.mode(QueueKind::Steering), &Value::from(5));
    }

    #[test]
    fn clear_returns_removed_texts() {
        let mut q = MessageQueues::new(ONE_AT_A_TIME.into(), ONE_AT_A_TIME.into());
        q.push(QueueKind::FollowUp, user("x"));
        let removed = q.clear();
        assert_eq!(removed.follow_up, vec!["x"]);
        assert_eq!(q.pending_count(), 0);
        assert!(q.drain(QueueKind::FollowUp).is_empty());
    }
}

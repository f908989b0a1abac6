//! Model selection over RPC: the `--models` scope drives startup selection and `cycle_model`.

use crate::common::*;
use pi_fakellm::Script;
use serde_json::json;

#[test]
fn models_scope_picks_the_first_scoped_model_and_cycles_within_it() {
    let (_fake, root) = setup(Script::default(), DEFAULT_MODEL);
    let mut agent = root.spawn_with(
        false,
        &[
            "--models",
            "fake-anthropic/fake-claude-haiku,fake-openai/fake-gpt",
        ],
    );
    let state = agent.request(json!({"id": "s0", "type": "get_state"}));
    assert_eq!(state["data"]["model"]["id"], "fake-claude-haiku", "{state}");

    let c1 = agent.request(json!({"id": "c1", "type": "cycle_model"}));
    assert_eq!(c1["data"]["model"]["id"], "fake-gpt", "{c1}");
    assert_eq!(c1["data"]["isScoped"], true, "{c1}");

    let c2 = agent.request(json!({"id": "c2", "type": "cycle_model"}));
    assert_eq!(c2["data"]["model"]["id"], "fake-claude-haiku", "{c2}");
}

#[test]
fn without_a_scope_cycle_model_walks_every_available_model() {
    let (_fake, root) = setup(Script::default(), DEFAULT_MODEL);
    let mut agent = root.spawn();
    let c1 = agent.request(json!({"id": "c1", "type": "cycle_model"}));
    assert_eq!(c1["data"]["isScoped"], false, "{c1}");
    assert_ne!(c1["data"]["model"]["id"], "fake-gpt-mini", "{c1}");
}

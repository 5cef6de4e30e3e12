//! Property tests over random command sequences on the fixture study: no panic, offered options
//! always valid, refused commands change nothing, replay equals live, same seed same session.

use crate::common;

use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use wozkit_core::engine::{Command, Session, next_wakeup, offered, replay, step, valid_actions};
use wozkit_core::event::{Actor, Event, Role};

const STATES: &[&str] = &[
    "start", "hello", "ask", "moving", "arrived", "time", "bye", "nope",
];

fn actor() -> impl Strategy<Value = Actor> {
    prop_oneof![
        Just(Actor::Participant {
            role: Role::User,
            participant: None
        }),
        Just(Actor::Participant {
            role: Role::Wizard,
            participant: None
        }),
        Just(Actor::System),
    ]
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        proptest::sample::select(STATES).prop_map(|s| Command::Say { state: s.into() }),
        ".{0,12}".prop_map(|text| Command::Text { text }),
        (
            proptest::sample::select(&["send", "look", "fly"][..]),
            proptest::sample::select(&["h1", "x"][..]),
            proptest::option::of(proptest::sample::select(&["base", "east", "moon"][..]))
        )
            .prop_map(|(a, r, t)| Command::Act {
                action: a.into(),
                robot: r.into(),
                target: t.map(Into::into)
            }),
        Just(Command::Approve),
        Just(Command::Deny),
        Just(Command::Hint),
        Just(Command::Finish),
        Just(Command::Tick),
        Just(Command::Fixed { id: "okay".into() }),
        Just(Command::Disconnect { role: Role::User }),
        Just(Command::Reconnect { role: Role::User }),
    ]
}

/// Gives each command an absolute time from the random gaps.
fn timed(cmds: Vec<(Actor, Command, u16)>) -> Vec<(Actor, Command, u64)> {
    let mut now = 0;
    cmds.into_iter()
        .map(|(a, c, dt)| {
            now += u64::from(dt) * 100;
            (a, c, now)
        })
        .collect()
}

/// Plays a sequence; returns the final state, the log and which commands were accepted.
fn play(seed: u64, cmds: &[(Actor, Command, u64)]) -> (Session, Vec<Event>, Vec<bool>) {
    let study = common::mini_with_targetless_action();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut s = Session::new(&study, "p");
    let mut log = vec![];
    let mut now = 0u64;
    let start = step(
        &study,
        &s,
        &Actor::System,
        Command::Start { seed },
        now,
        &mut rng,
    )
    .expect("start");
    let record =
        |events: Vec<(Actor, wozkit_core::event::EventKind)>, now: u64, log: &mut Vec<Event>| {
            for (a, k) in events {
                log.push(Event {
                    v: 1,
                    session: "p".into(),
                    seq: log.len() as u64 + 1,
                    at_ms: now,
                    actor: a,
                    kind: k,
                });
            }
        };
    s = start.session;
    record(start.events, now, &mut log);
    let mut accepted = vec![];
    for (actor, cmd, at) in cmds {
        now = *at;
        // Offered options are always accepted by the engine.
        for o in offered(&study, &s) {
            let wiz = Actor::Participant {
                role: Role::Wizard,
                participant: None,
            };
            assert!(
                step(
                    &study,
                    &s,
                    &wiz,
                    Command::Say {
                        state: o.state.clone()
                    },
                    now,
                    &mut rng.clone()
                )
                .is_ok(),
                "offered {} refused",
                o.state
            );
        }
        for (a, r, t) in valid_actions(&study, &s) {
            let wiz = Actor::Participant {
                role: Role::Wizard,
                participant: None,
            };
            assert!(
                step(
                    &study,
                    &s,
                    &wiz,
                    Command::Act {
                        action: a,
                        robot: r,
                        target: t
                    },
                    now,
                    &mut rng.clone()
                )
                .is_ok()
            );
        }
        if let Some(t) = next_wakeup(&study, &s) {
            assert!(!s.is_ended(), "an ended session asks to be woken at {t}");
        }
        match step(&study, &s, actor, cmd.clone(), now, &mut rng) {
            Ok(st) => {
                s = st.session;
                record(st.events, now, &mut log);
                accepted.push(true);
            }
            Err(_) => accepted.push(false),
        }
    }
    (s, log, accepted)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    #[test]
    fn replay_equals_live_and_same_seed_same_session(seed in any::<u64>(), cmds in proptest::collection::vec((actor(), command(), 0u16..400), 0..60)) {
        let study = common::mini_with_targetless_action();
        let cmds = timed(cmds);
        let (live, log, _) = play(seed, &cmds);
        prop_assert_eq!(&replay(&study, "p", &log), &live);
        let (again, log2, _) = play(seed, &cmds);
        prop_assert_eq!(&again, &live);
        prop_assert_eq!(&log2, &log);
        for (i, e) in log.iter().enumerate() {
            prop_assert_eq!(e.seq, i as u64 + 1);
        }
        // Whatever target a client sends, a targetless action stores none, and every robot
        // stands at one of the study's locations.
        for e in &log {
            if let wozkit_core::event::EventKind::ActionStarted { action, target, .. } = &e.kind {
                prop_assert!(action != "look" || target.is_none(), "{:?}", e);
            }
        }
        for r in &live.robots {
            prop_assert!(study.study.world.locations.iter().any(|l| l.id == r.location));
        }
    }

    /// A refused command leaves no trace: dropping every refused command from the sequence gives
    /// exactly the same log (so refusals touch neither the state nor the randomness).
    #[test]
    fn refused_commands_change_nothing(seed in any::<u64>(), cmds in proptest::collection::vec((actor(), command(), 0u16..400), 0..60)) {
        let cmds = timed(cmds);
        let (live, log, accepted) = play(seed, &cmds);
        let kept: Vec<_> = cmds.into_iter().zip(&accepted).filter(|(_, ok)| **ok).map(|(c, _)| c).collect();
        let (again, log2, accepted2) = play(seed, &kept);
        prop_assert!(accepted2.iter().all(|ok| *ok));
        prop_assert_eq!(log2, log);
        prop_assert_eq!(again, live);
    }
}

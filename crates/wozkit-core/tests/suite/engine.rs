//! The engine's rules, one behaviour per test, on the fixture study.

use crate::common::{self, Run, USER, WIZARD};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use wozkit_core::engine::{self, Command, Refusal, Session, next_wakeup, offered, replay, step};
use wozkit_core::event::{Actor, EndReason, Event, EventKind, Role};

impl Run {
    fn say(&mut self, state: &str) -> Vec<EventKind> {
        self.ok(
            &WIZARD,
            Command::Say {
                state: state.into(),
            },
        )
    }
    fn offered(&self) -> Vec<String> {
        offered(&self.study, &self.s)
            .into_iter()
            .map(|o| o.state)
            .collect()
    }
    fn advance_to_wakeup(&mut self) -> Vec<EventKind> {
        let t = next_wakeup(&self.study, &self.s).expect("a timer is pending");
        self.now = t;
        self.ok(&Actor::System, Command::Tick)
    }
}

#[test]
fn offers_transitions_and_globals_but_not_the_initial_state() {
    let r = Run::new();
    assert_eq!(r.offered(), vec!["hello", "time"]);
}

#[test]
fn saying_an_option_moves_the_state_and_fills_slots() {
    let mut r = Run::new();
    let ev = r.say("hello");
    let EventKind::Message { text, .. } = &ev[0] else {
        panic!("{ev:?}")
    };
    assert!(text.contains("east tower"), "{text}");
    assert!(matches!(&ev[1], EventKind::StateEntered { to, .. } if to == "hello"));
    assert_eq!(r.offered(), vec!["ask", "bye", "time"]);
}

#[test]
fn global_states_do_not_move_the_state() {
    let mut r = Run::new();
    r.say("hello");
    let ev = r.say("time");
    assert_eq!(ev.len(), 1);
    assert_eq!(r.offered(), vec!["ask", "bye", "time"]);
}

#[test]
fn the_template_is_stable_while_the_state_is_current() {
    let mut r = Run::new();
    let a = offered(&r.study, &r.s);
    r.ok(&USER, Command::Text { text: "hi".into() });
    let b = offered(&r.study, &r.s);
    assert_eq!(
        a.iter().map(|o| o.template).collect::<Vec<_>>(),
        b.iter().map(|o| o.template).collect::<Vec<_>>()
    );
}

#[test]
fn wrong_role_and_not_offered_are_refused_without_change() {
    let mut r = Run::new();
    assert_eq!(
        r.refused(
            &USER,
            Command::Say {
                state: "hello".into()
            }
        ),
        Refusal::WrongRole {
            expected: Role::Wizard
        }
    );
    assert_eq!(
        r.refused(
            &WIZARD,
            Command::Say {
                state: "bye".into()
            }
        ),
        Refusal::NotOffered {
            state: "bye".into()
        }
    );
    assert_eq!(
        r.refused(&WIZARD, Command::Approve),
        Refusal::WrongRole {
            expected: Role::User
        }
    );
    assert_eq!(r.refused(&USER, Command::Approve), Refusal::NoLock);
    assert_eq!(
        r.refused(&USER, Command::Text { text: "   ".into() }),
        Refusal::EmptyText
    );
    assert!(matches!(
        r.refused(
            &USER,
            Command::Text {
                text: "x".repeat(5000)
            }
        ),
        Refusal::TextTooLong { .. }
    ));
}

#[test]
fn approval_lock_withholds_options_until_the_user_answers() {
    let mut r = Run::new();
    r.say("hello");
    let ev = r.say("ask");
    assert!(
        ev.iter()
            .any(|e| matches!(e, EventKind::LockStarted { .. }))
    );
    assert!(r.offered().is_empty());
    assert_eq!(
        r.refused(
            &WIZARD,
            Command::Say {
                state: "bye".into()
            }
        ),
        Refusal::Locked
    );
    r.ok(&USER, Command::Approve);
    assert_eq!(r.offered(), vec!["bye", "moving", "time"]);
}

#[test]
fn robot_actions_check_capability_target_and_busy_then_complete_on_time() {
    let mut r = Run::new();
    let act = |target: Option<&str>| Command::Act {
        action: "send".into(),
        robot: "h1".into(),
        target: target.map(Into::into),
    };
    assert_eq!(r.refused(&WIZARD, act(None)), Refusal::TargetRequired);
    assert!(matches!(
        r.refused(&WIZARD, act(Some("base"))),
        Refusal::GuardFailed { .. }
    ));
    assert!(matches!(
        r.refused(&WIZARD, act(Some("moon"))),
        Refusal::UnknownLocation { .. }
    ));
    let started = r.now;
    r.ok(&WIZARD, act(Some("east")));
    assert!(matches!(
        r.refused(&WIZARD, act(Some("east"))),
        Refusal::RobotBusy { .. }
    ));
    // Progress every 5 s of a 30 s ground move, then completion.
    let mut progress = 0;
    loop {
        let ev = r.advance_to_wakeup();
        if ev
            .iter()
            .any(|e| matches!(e, EventKind::ActionCompleted { .. }))
        {
            assert_eq!(r.now - started, 30_000);
            assert!(
                ev.iter()
                    .any(|e| matches!(e, EventKind::Milestone { subtask, .. } if subtask == "fix"))
            );
            assert!(
                ev.iter()
                    .any(|e| matches!(e, EventKind::OptionsUnlocked { .. }))
            );
            break;
        }
        progress += ev
            .iter()
            .filter(|e| matches!(e, EventKind::ActionProgress { .. }))
            .count();
    }
    assert_eq!(progress, 5);
    assert_eq!(r.s.robots[0].location, "east");
    assert!(r.offered().contains(&"arrived".to_string()));
    let ev = r.say("arrived");
    let EventKind::Message { text, .. } = &ev[0] else {
        panic!()
    };
    assert_eq!(text, "Husky 1 arrived; fire is out: true");
}

#[test]
fn terminal_state_ends_with_goal() {
    let mut r = Run::new();
    r.say("hello");
    let ev = r.say("bye");
    assert!(matches!(
        ev.last(),
        Some(EventKind::SessionEnded {
            reason: EndReason::Terminal,
            goal_reached: false
        })
    ));
    assert_eq!(r.refused(&WIZARD, Command::Hint), Refusal::Ended);
}

#[test]
fn time_limit_ends_the_session() {
    let mut r = Run::new();
    assert_eq!(next_wakeup(&r.study, &r.s), Some(1_000 + 360_000));
    let ev = r.advance_to_wakeup();
    assert!(matches!(
        ev.last(),
        Some(EventKind::SessionEnded {
            reason: EndReason::TimeLimit,
            ..
        })
    ));
}

#[test]
fn disconnect_beyond_grace_ends_but_reconnect_in_time_does_not() {
    let mut r = Run::new();
    r.ok(&Actor::System, Command::Disconnect { role: Role::User });
    r.now += 10_000;
    r.ok(&Actor::System, Command::Reconnect { role: Role::User });
    r.ok(&Actor::System, Command::Disconnect { role: Role::User });
    let ev = r.advance_to_wakeup();
    assert!(matches!(
        ev.last(),
        Some(EventKind::SessionEnded {
            reason: EndReason::Disconnect,
            ..
        })
    ));
}

#[test]
fn finish_and_hint() {
    let mut r = Run::new();
    let ev = r.ok(&WIZARD, Command::Hint);
    let EventKind::HintGiven { state } = &ev[0] else {
        panic!()
    };
    assert!(r.offered().contains(state));
    let ev = r.ok(&USER, Command::Finish);
    assert!(matches!(
        ev.last(),
        Some(EventKind::SessionEnded {
            reason: EndReason::Finished,
            ..
        })
    ));
}

#[test]
fn replay_of_the_log_equals_the_live_state() {
    let mut r = Run::new();
    r.say("hello");
    r.ok(
        &WIZARD,
        Command::Act {
            action: "send".into(),
            robot: "h1".into(),
            target: Some("east".into()),
        },
    );
    r.advance_to_wakeup();
    r.say("ask");
    r.ok(&USER, Command::Deny);
    assert_eq!(replay(&r.study, "t", &r.log), r.s);
    // Events serialise and read back unchanged (the store keeps JSON).
    for e in &r.log {
        let back: Event = serde_json::from_str(&serde_json::to_string(e).unwrap()).unwrap();
        assert_eq!(&back, e);
    }
    let _ = engine::valid_actions(&r.study, &r.s);
}

#[test]
fn an_approval_prompt_is_rendered_with_its_slots_filled() {
    let mut r = Run::new();
    r.say("hello");
    let ev = r.say("ask");
    let prompt = ev.iter().find_map(|e| match e {
        EventKind::LockStarted { prompt, .. } => prompt.clone(),
        _ => None,
    });
    assert_eq!(prompt.as_deref(), Some("Send a robot to east tower?"));
    // The live state carries the rendered text for the pages, and a replay gives the same.
    let lock = r.s.lock.clone().expect("the approval lock is on");
    assert_eq!(lock.prompt.as_deref(), Some("Send a robot to east tower?"));
    assert_eq!(replay(&r.study, "t", &r.log), r.s);
}

#[test]
fn a_target_sent_with_a_targetless_action_is_refused_and_never_stored() {
    let mut r = Run::new();
    r.study = common::mini_with_targetless_action();
    let look = |target: Option<&str>| Command::Act {
        action: "look".into(),
        robot: "h1".into(),
        target: target.map(Into::into),
    };
    for target in ["east", "anywhere at all"] {
        let refusal = r.refused(&WIZARD, look(Some(target)));
        assert_eq!(
            refusal,
            Refusal::TargetNotTaken {
                action: "Look around".into()
            }
        );
        assert_eq!(
            refusal.to_string(),
            "“Look around” takes no target location"
        );
    }
    let ev = r.ok(&WIZARD, look(None));
    assert!(
        matches!(&ev[0], EventKind::ActionStarted { target: None, .. }),
        "{ev:?}"
    );
    // Slots name the place where the robot is; completing it moves nothing.
    assert_eq!(r.s.last_target.as_deref(), Some("base"));
    r.advance_to_wakeup();
    assert_eq!(r.s.robots[0].location, "base");
}

#[test]
fn a_stored_target_of_a_targetless_action_is_ignored_on_replay() {
    // A log written before targets were refused: the target neither names nor moves anything.
    let mut r = Run::new();
    r.study = common::mini_with_targetless_action();
    r.ok(
        &WIZARD,
        Command::Act {
            action: "look".into(),
            robot: "h1".into(),
            target: None,
        },
    );
    for e in &mut r.log {
        if let EventKind::ActionStarted { target, .. } = &mut e.kind {
            *target = Some("the moon".into());
        }
    }
    let mut s = replay(&r.study, "t", &r.log);
    assert_eq!(s, r.s);
    let completed = EventKind::ActionCompleted {
        action: "look".into(),
        robot: "h1".into(),
        target: Some("the moon".into()),
        battery: 100.0,
    };
    engine::apply(&r.study, &mut s, &Actor::System, &completed, r.now + 4_000);
    assert_eq!(s.robots[0].location, "base");
}

#[test]
fn huge_numbers_in_an_unvalidated_study_do_not_overflow_time() {
    // The loader bounds every number; the engine must still not panic on a study built in code.
    for secs in [1e300, f64::INFINITY, f64::NAN, -5.0, f64::MAX] {
        let mut study = common::mini_with_targetless_action();
        study.study.session.time_limit_s = u32::MAX;
        study.study.session.disconnect_grace_s = u32::MAX;
        for a in &mut study.study.actions {
            a.duration.default = secs;
            a.duration.by_kind.clear();
            a.progress_every_s = secs;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let near_end = u64::MAX - 10;
        let mut s = Session::new(&study, "x");
        for (actor, cmd) in [
            (Actor::System, Command::Start { seed: 3 }),
            (
                WIZARD,
                Command::Act {
                    action: "look".into(),
                    robot: "h1".into(),
                    target: None,
                },
            ),
            (Actor::System, Command::Disconnect { role: Role::User }),
            (Actor::System, Command::Tick),
        ] {
            if let Ok(out) = step(&study, &s, &actor, cmd, near_end, &mut rng) {
                s = out.session;
            }
        }
        let wake = next_wakeup(&study, &s).unwrap_or(u64::MAX);
        if let Ok(out) = step(&study, &s, &Actor::System, Command::Tick, wake, &mut rng) {
            s = out.session;
        }
        let _ = engine::render(&study, &s, "{robot.eta} {robot.progress} {time_left}");
        assert!(s.started, "{secs}: the session started");
    }
}

//! The engine's rules, one behaviour per test, on the fixture study.

mod common;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use wozkit_core::engine::{self, Command, Refusal, Session, next_wakeup, offered, replay, step};
use wozkit_core::event::{Actor, EndReason, Event, EventKind, Role};
use wozkit_core::load::LoadedStudy;

const USER: Actor = Actor::Participant {
    role: Role::User,
    participant: None,
};
const WIZARD: Actor = Actor::Participant {
    role: Role::Wizard,
    participant: None,
};

/// A session driven step by step, keeping its log like the store would.
struct Run {
    study: LoadedStudy,
    s: Session,
    log: Vec<Event>,
    rng: ChaCha8Rng,
    now: u64,
}

impl Run {
    fn new() -> Run {
        let study = common::mini();
        let s = Session::new(&study, "t");
        let mut r = Run {
            study,
            s,
            log: vec![],
            rng: ChaCha8Rng::seed_from_u64(1),
            now: 1_000,
        };
        r.ok(&Actor::System, Command::Start { seed: 1 });
        r
    }
    fn run(&mut self, actor: &Actor, cmd: Command) -> Result<Vec<EventKind>, Refusal> {
        let st = step(&self.study, &self.s, actor, cmd, self.now, &mut self.rng)?;
        for (a, k) in &st.events {
            self.log.push(Event {
                v: 1,
                session: "t".into(),
                seq: self.log.len() as u64 + 1,
                at_ms: self.now,
                actor: a.clone(),
                kind: k.clone(),
            });
        }
        self.s = st.session;
        Ok(st.events.into_iter().map(|(_, k)| k).collect())
    }
    fn ok(&mut self, actor: &Actor, cmd: Command) -> Vec<EventKind> {
        self.run(actor, cmd.clone())
            .unwrap_or_else(|e| panic!("{cmd:?} refused: {e}"))
    }
    fn refused(&mut self, actor: &Actor, cmd: Command) -> Refusal {
        let before = self.s.clone();
        let e = self.run(actor, cmd).expect_err("should be refused");
        assert_eq!(self.s, before, "a refused command changed the state");
        e
    }
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

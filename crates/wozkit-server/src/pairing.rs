//! What happens once the lobby has decided: a pair gets a session and a room; a participant whose
//! wait ran out gets either a bot partner or a "no partner" completion code. Every outcome is a
//! session with its own log, so even an unpaired participant's code is an event. A participant
//! whose partner never arrived in the room goes back to the waiting room, first in the queue.

use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant;
use wozkit_core::engine::{self, Command, Session};
use wozkit_core::event::{Actor, EndReason, EventKind, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_store::{NewEvent, NewSession, ParticipantPatch, StoreError, new_id};

use crate::app::{AppState, now_ms};
use crate::flow;
use crate::lobby::Ticket;
use crate::room;

async fn create_session(app: &AppState, study: &LoadedStudy) -> Result<(String, u64), StoreError> {
    create_seeded_session(app, study, rand::random()).await
}

async fn create_seeded_session(
    app: &AppState,
    study: &LoadedStudy,
    seed: u64,
) -> Result<(String, u64), StoreError> {
    let id = new_id();
    app.store
        .create_session(NewSession {
            id: id.clone(),
            study_id: study.study.id.clone(),
            study_version: study.study.version.clone(),
            seed,
            created_at_ms: now_ms(),
        })
        .await?;
    Ok((id, seed))
}

/// Leases the room of a session just created, before anyone is seated in it: from then on no
/// other instance can rebuild it (a participant's socket reaching another instance finds the
/// lease and is relayed here), and its task only renews the lease.
async fn lease_new_room(app: &AppState, session: &str) -> Result<(), StoreError> {
    if room::lease::acquire(app, session).await? {
        Ok(())
    } else {
        Err(StoreError::Conflict {
            what: "room lease of a new session",
            key: session.to_owned(),
        })
    }
}

/// Places the participant in the session, on its room page.
async fn seat(
    app: &AppState,
    study: &LoadedStudy,
    t: &Ticket,
    session: &str,
) -> Result<(), StoreError> {
    let from = match app.store.participant(&t.participant).await? {
        Some(p) => flow::index(&p.flow_step),
        None => 0,
    };
    let step = flow::room_step(&study.study, t.role, from);
    app.store
        .update_participant(
            &t.participant,
            ParticipantPatch {
                role: Some(Some(t.role)),
                session_id: Some(Some(session.to_string())),
                flow_step: Some(flow::encode(&study.study, t.role, step)),
                ..ParticipantPatch::default()
            },
        )
        .await?;
    Ok(())
}

/// Two complementary participants: a new session and its room. Returns the session id.
pub async fn pair(
    app: &AppState,
    study: &Arc<LoadedStudy>,
    a: &Ticket,
    b: &Ticket,
) -> Result<String, StoreError> {
    let (id, seed) = create_session(app, study).await?;
    lease_new_room(app, &id).await?;
    // The room is in memory before anyone is seated, so a participant's socket arriving as
    // soon as its seat is stored finds it; it never rebuilds the room from the participants
    // seated so far. If a seat cannot be stored, the room ends the session at its join
    // deadline (nobody, or only one participant, joins), like a pair one of whom never comes.
    let humans = vec![
        (a.role, a.participant.clone()),
        (b.role, b.participant.clone()),
    ];
    room::start_new(app, study.clone(), &id, seed, humans, vec![]);
    seat(app, study, a, &id).await?;
    seat(app, study, b, &id).await?;
    tracing::info!(session = id, study = study.study.id, "paired");
    Ok(id)
}

/// The wait ran out and the study backfills: a built-in bot takes the other role.
pub async fn with_bot(
    app: &AppState,
    study: &Arc<LoadedStudy>,
    me: &Ticket,
) -> Result<String, StoreError> {
    let (id, seed) = create_session(app, study).await?;
    lease_new_room(app, &id).await?;
    // In memory before the seat, as in `pair`.
    let humans = vec![(me.role, me.participant.clone())];
    room::start_new(app, study.clone(), &id, seed, humans, vec![me.role.other()]);
    seat(app, study, me, &id).await?;
    tracing::info!(session = id, study = study.study.id, "paired with a bot");
    Ok(id)
}

/// A researcher pilots alone (`serve --simulated-user`): the simulated user takes the user's
/// seat opposite `me`, the wizard, at once.
pub async fn with_simulated_user(
    app: &AppState,
    study: &Arc<LoadedStudy>,
    me: &Ticket,
    user: Arc<crate::room::ModelUser>,
) -> Result<String, StoreError> {
    let (id, seed) = create_session(app, study).await?;
    lease_new_room(app, &id).await?;
    // In memory before the seat, as in `pair`.
    let humans = vec![(me.role, me.participant.clone())];
    let models = room::Models {
        user: Some(user),
        wizard: None,
    };
    room::start_with_models(app, study.clone(), &id, seed, humans, vec![], models);
    seat(app, study, me, &id).await?;
    tracing::info!(
        session = id,
        study = study.study.id,
        "paired with the simulated user"
    );
    Ok(id)
}

/// A dry run with nobody (`wozkit simulate-users`): the simulated user in the user's seat and,
/// in the wizard's, the system under test `wizard` or else the built-in wizard bot, in a session
/// seeded with `seed`.
pub(crate) async fn simulated_pair(
    app: &AppState,
    study: &Arc<LoadedStudy>,
    seed: u64,
    user: Arc<crate::room::ModelUser>,
    wizard: Option<Arc<crate::room::SystemWizard>>,
) -> Result<String, StoreError> {
    let (id, seed) = create_seeded_session(app, study, seed).await?;
    lease_new_room(app, &id).await?;
    let models = room::Models {
        user: Some(user),
        wizard,
    };
    room::start_with_models(
        app,
        study.clone(),
        &id,
        seed,
        vec![],
        vec![Role::Wizard],
        models,
    );
    Ok(id)
}

/// The wait ran out: the participant gets a session that ends at once for lack of a partner,
/// a completion code marked `no_partner`, and goes to the completion page.
pub async fn no_partner(
    app: &AppState,
    study: &Arc<LoadedStudy>,
    me: &Ticket,
) -> Result<(), StoreError> {
    let (id, seed) = create_session(app, study).await?;
    let now = now_ms();
    let person = Actor::Participant {
        role: me.role,
        participant: Some(me.participant.clone()),
    };
    let mut s = Session::new(study, &id);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut events: Vec<NewEvent> = vec![];
    for (actor, cmd) in [
        (Actor::System, Command::Start { seed }),
        (
            person.clone(),
            Command::Join {
                role: me.role,
                bot: false,
            },
        ),
        (
            Actor::System,
            Command::Abort {
                reason: EndReason::NoPartner,
            },
        ),
    ] {
        // These three always apply to a fresh session; a refusal would only skip its events.
        if let Ok(step) = engine::step(study, &s, &actor, cmd, now, &mut rng) {
            events.extend(step.events.into_iter().map(|(actor, kind)| NewEvent {
                actor,
                kind,
                at_ms: now,
            }));
            s = step.session;
        }
    }
    let code = app.code_key.code(&me.participant);
    events.push(NewEvent {
        actor: Actor::System,
        kind: EventKind::CompletionIssued {
            role: me.role,
            code: code.clone(),
            no_partner: true,
        },
        at_ms: now,
    });
    app.store.append(&id, events).await?;
    app.store
        .end_session(&id, EndReason::NoPartner, now)
        .await?;
    let from = match app.store.participant(&me.participant).await? {
        Some(p) => flow::index(&p.flow_step),
        None => 0,
    };
    let step = flow::after_no_partner(&study.study, me.role, from);
    app.store
        .update_participant(
            &me.participant,
            ParticipantPatch {
                role: Some(Some(me.role)),
                session_id: Some(Some(id.clone())),
                flow_step: Some(flow::encode(&study.study, me.role, step)),
                completion_code: Some(Some(code)),
            },
        )
        .await?;
    tracing::info!(session = id, study = study.study.id, "no partner");
    Ok(())
}

/// The partner of `stranded` never arrived in the room of `session`, which is about to end:
/// they leave the session (their log stays as it is) and go back to the waiting room, at the
/// front of the queue if they return within the study's grace period. Their page, told that
/// the session ended, reloads into the waiting room; the wait limit starts afresh.
pub async fn requeue_stranded(
    app: &AppState,
    study: &LoadedStudy,
    session: &str,
    stranded: &[String],
) -> Result<(), StoreError> {
    let grace = Duration::from_secs(u64::from(study.study.session.disconnect_grace_s));
    for participant in stranded {
        // Still on the room page: without a session, that page is the waiting room.
        let patch = ParticipantPatch {
            session_id: Some(None),
            ..ParticipantPatch::default()
        };
        app.store.update_participant(participant, patch).await?;
        app.lobby.put_first(participant, Instant::now() + grace);
        tracing::info!(
            session,
            participant,
            "partner never arrived; back to the front of the queue"
        );
    }
    Ok(())
}

/// The role a participant without one gets (lab links may name it): the one with fewer
/// participants present across every instance
/// ([`Lobby::assign_role`](crate::lobby::Lobby::assign_role)).
pub async fn role_or(role: Option<Role>, app: &AppState, study: &str) -> Result<Role, StoreError> {
    match role {
        Some(role) => Ok(role),
        None => {
            let stale = Duration::from_millis(app.tunables.stale_after_ms);
            let arrival = app.study(Some(study)).map_or(Duration::ZERO, |s| {
                Duration::from_secs(u64::from(s.study.pairing.arrival_s))
            });
            app.lobby
                .assign_role(app.store.as_ref(), study, now_ms(), stale, arrival)
                .await
        }
    }
}

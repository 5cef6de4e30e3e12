//! Prolific through its REST API (`https://api.prolific.com/api/v1/`, token in
//! `PROLIFIC_TOKEN`).

-- A claim in one round trip. The claim used to be about nine statements sent one after the
-- other from the server, holding the worker's advisory lock and an item's row lock across every
-- round trip: with 1,000 workers the backends spent their time waiting for the client's next
-- statement while others queued on those locks. The same steps now run inside the database, so
-- the locks are held only while the claim computes. The rules are those written at the top of
-- `crates/wozkit-store/src/postgres/leases.rs`; this function is their one implementation.
--
-- Returns one row: status 'leased' with the item and its dialogues (JSON array), 'none' when no
-- item is eligible (or the worker holds `p_max` leases of the item pool), or 'conflict' when a
-- lease with id `p_lease` exists already (nothing is written then).
--
-- The candidate query is written out four times (preferred or usual order, SKIP LOCKED or
-- waiting): the locking clause cannot be a parameter, and static statements keep their plans
-- cached for the connection, where EXECUTE would plan the query again on every claim.

CREATE FUNCTION wozkit_claim(
    p_study   TEXT,
    p_worker  TEXT,
    p_pool    TEXT,
    p_now     BIGINT,
    p_expires BIGINT,
    p_lease   TEXT,
    p_max     BIGINT,
    p_prefer  TEXT[]
) RETURNS TABLE (o_status TEXT, o_item TEXT, o_dialogues TEXT)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_full      TEXT[] := '{}';
    v_candidate TEXT;
    v_pool      TEXT;
    v_needed    BIGINT;
    v_taken     BIGINT;
    v_dialogues TEXT;
    v_wait      BOOLEAN;
BEGIN
    -- One worker's claims run one after the other (held until the end of this statement's
    -- transaction).
    PERFORM pg_advisory_xact_lock(hashtextextended(p_study || chr(10) || p_worker, 0));
    IF p_max IS NOT NULL AND (SELECT COUNT(*) FROM leases
                              WHERE study_id = p_study AND worker = p_worker
                                AND pool = 'item') >= p_max THEN
        RETURN QUERY SELECT 'none'::TEXT, NULL::TEXT, NULL::TEXT;
        RETURN;
    END IF;
    LOOP
        -- A subtransaction per candidate: an item found full is let go (its row lock released)
        -- before the next one is tried, so a claim holds at most one item lock at a time.
        BEGIN
            v_candidate := NULL;
            -- First an item nobody else holds (preferred ones first), then, if every eligible
            -- item is held, the best one, waiting for its lock.
            FOREACH v_wait IN ARRAY ARRAY[FALSE, TRUE] LOOP
                IF cardinality(p_prefer) > 0 AND NOT v_wait THEN
                    SELECT i.item_id INTO v_candidate
                    FROM UNNEST(p_prefer) WITH ORDINALITY AS p (item_id, rank)
                    JOIN eval_items i ON i.study_id = p_study AND i.item_id = p.item_id
                    WHERE i.study_id = p_study AND i.pool = p_pool
                      AND NOT (i.item_id = ANY (v_full))
                      AND (i.pool = 'gold' OR (SELECT COUNT(*) FROM leases l
                            WHERE l.study_id = p_study AND l.item_id = i.item_id
                              AND (l.state = 'done'
                                   OR (l.state = 'leased' AND l.expires_at_ms > p_now)))
                          < i.needed)
                      AND NOT EXISTS (SELECT 1 FROM leases w
                                      WHERE w.study_id = p_study AND w.worker = p_worker
                                        AND w.item_id = i.item_id)
                      AND NOT EXISTS (SELECT 1 FROM eval_item_dialogues d
                                      WHERE d.study_id = p_study AND d.item_id = i.item_id
                                        AND d.dialogue_id IN (
                                            SELECT jsonb_array_elements_text(w.dialogues::jsonb)
                                            FROM leases w
                                            WHERE w.study_id = p_study AND w.worker = p_worker))
                    ORDER BY p.rank
                    FOR UPDATE OF i SKIP LOCKED LIMIT 1;
                ELSIF cardinality(p_prefer) > 0 THEN
                    SELECT i.item_id INTO v_candidate
                    FROM UNNEST(p_prefer) WITH ORDINALITY AS p (item_id, rank)
                    JOIN eval_items i ON i.study_id = p_study AND i.item_id = p.item_id
                    WHERE i.study_id = p_study AND i.pool = p_pool
                      AND NOT (i.item_id = ANY (v_full))
                      AND (i.pool = 'gold' OR (SELECT COUNT(*) FROM leases l
                            WHERE l.study_id = p_study AND l.item_id = i.item_id
                              AND (l.state = 'done'
                                   OR (l.state = 'leased' AND l.expires_at_ms > p_now)))
                          < i.needed)
                      AND NOT EXISTS (SELECT 1 FROM leases w
                                      WHERE w.study_id = p_study AND w.worker = p_worker
                                        AND w.item_id = i.item_id)
                      AND NOT EXISTS (SELECT 1 FROM eval_item_dialogues d
                                      WHERE d.study_id = p_study AND d.item_id = i.item_id
                                        AND d.dialogue_id IN (
                                            SELECT jsonb_array_elements_text(w.dialogues::jsonb)
                                            FROM leases w
                                            WHERE w.study_id = p_study AND w.worker = p_worker))
                    ORDER BY p.rank
                    FOR UPDATE OF i LIMIT 1;
                END IF;
                EXIT WHEN v_candidate IS NOT NULL;
                IF NOT v_wait THEN
                    SELECT i.item_id INTO v_candidate
                    FROM eval_items i
                    WHERE i.study_id = p_study AND i.pool = p_pool
                      AND NOT (i.item_id = ANY (v_full))
                      AND (i.pool = 'gold' OR (SELECT COUNT(*) FROM leases l
                            WHERE l.study_id = p_study AND l.item_id = i.item_id
                              AND (l.state = 'done'
                                   OR (l.state = 'leased' AND l.expires_at_ms > p_now)))
                          < i.needed)
                      AND NOT EXISTS (SELECT 1 FROM leases w
                                      WHERE w.study_id = p_study AND w.worker = p_worker
                                        AND w.item_id = i.item_id)
                      AND NOT EXISTS (SELECT 1 FROM eval_item_dialogues d
                                      WHERE d.study_id = p_study AND d.item_id = i.item_id
                                        AND d.dialogue_id IN (
                                            SELECT jsonb_array_elements_text(w.dialogues::jsonb)
                                            FROM leases w
                                            WHERE w.study_id = p_study AND w.worker = p_worker))
                    ORDER BY i.taken, i.item_id
                    FOR UPDATE OF i SKIP LOCKED LIMIT 1;
                ELSE
                    SELECT i.item_id INTO v_candidate
                    FROM eval_items i
                    WHERE i.study_id = p_study AND i.pool = p_pool
                      AND NOT (i.item_id = ANY (v_full))
                      AND (i.pool = 'gold' OR (SELECT COUNT(*) FROM leases l
                            WHERE l.study_id = p_study AND l.item_id = i.item_id
                              AND (l.state = 'done'
                                   OR (l.state = 'leased' AND l.expires_at_ms > p_now)))
                          < i.needed)
                      AND NOT EXISTS (SELECT 1 FROM leases w
                                      WHERE w.study_id = p_study AND w.worker = p_worker
                                        AND w.item_id = i.item_id)
                      AND NOT EXISTS (SELECT 1 FROM eval_item_dialogues d
                                      WHERE d.study_id = p_study AND d.item_id = i.item_id
                                        AND d.dialogue_id IN (
                                            SELECT jsonb_array_elements_text(w.dialogues::jsonb)
                                            FROM leases w
                                            WHERE w.study_id = p_study AND w.worker = p_worker))
                    ORDER BY i.taken, i.item_id
                    FOR UPDATE OF i LIMIT 1;
                END IF;
                EXIT WHEN v_candidate IS NOT NULL;
            END LOOP;
            IF v_candidate IS NULL THEN
                RETURN QUERY SELECT 'none'::TEXT, NULL::TEXT, NULL::TEXT;
                RETURN;
            END IF;
            -- A new statement: its snapshot holds every commit made before the lock was granted.
            SELECT i.pool, i.needed,
                   (SELECT COUNT(*) FROM leases l
                    WHERE l.study_id = p_study AND l.item_id = v_candidate
                      AND (l.state = 'done' OR (l.state = 'leased' AND l.expires_at_ms > p_now))),
                   i.dialogues
            INTO v_pool, v_needed, v_taken, v_dialogues
            FROM eval_items i WHERE i.study_id = p_study AND i.item_id = v_candidate;
            IF v_pool <> 'gold' AND v_taken >= v_needed THEN
                -- Full after all: undo this block (letting the item go) and try the next one.
                RAISE EXCEPTION 'item full' USING ERRCODE = 'WZ001';
            END IF;
            INSERT INTO leases (id, study_id, item_id, worker, pool, dialogues, claimed_at_ms,
                                expires_at_ms, state)
            VALUES (p_lease, p_study, v_candidate, p_worker, p_pool, v_dialogues, p_now,
                    p_expires, 'leased')
            ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN
                RETURN QUERY SELECT 'conflict'::TEXT, NULL::TEXT, NULL::TEXT;
                RETURN;
            END IF;
            UPDATE eval_items SET taken = taken + 1
            WHERE study_id = p_study AND item_id = v_candidate;
            RETURN QUERY SELECT 'leased'::TEXT, v_candidate, v_dialogues;
            RETURN;
        EXCEPTION WHEN SQLSTATE 'WZ001' THEN
            v_full := v_full || v_candidate;
        END;
    END LOOP;
END
$$;

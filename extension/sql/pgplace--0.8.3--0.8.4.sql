-- pgplace 0.8.3 -> 0.8.4: placements announced by the library.
--
-- The statement trigger on place.placements that built their NOTIFY payloads (a transition
-- table, a PL/pgSQL call, seven array_aggs per INSERT) is dropped: the library sends the
-- same payloads, on the same channel, as it writes the placements (extension/src/notify.rs).
-- Listeners see no difference. Every placement and every other object is kept.

DROP TRIGGER notify_placements ON place.placements;
DROP FUNCTION place._notify_placements();
COMMENT ON FUNCTION place._placement_payloads(bigint[], bigint[], int[], int[], int[], bigint[], timestamptz[]) IS
    'Internal: the NOTIFY payloads for rows inserted into place.placements (the library sends them since 0.8.4).';

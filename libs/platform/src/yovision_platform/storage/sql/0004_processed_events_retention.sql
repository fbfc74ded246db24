-- processed_events is pruned past a retention longer than the topics' (yovision_platform.processed_events):
-- the pruner deletes one consumer group's oldest rows in bounded batches.
CREATE INDEX processed_events_group_age_idx ON processed_events (consumer_group, processed_at);

GRANT DELETE ON processed_events TO {{runtime_role}};

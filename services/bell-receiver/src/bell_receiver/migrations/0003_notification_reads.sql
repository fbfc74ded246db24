-- Read marks of the inbox: one row per notification its user has read. The notification rows stay as they
-- were ingested; marking unread deletes the mark.
CREATE TABLE notification_reads (
    notification_id bigint      PRIMARY KEY REFERENCES notifications (id),
    user_id         text        NOT NULL,
    read_at         timestamptz NOT NULL DEFAULT now()
);

GRANT SELECT, INSERT, DELETE ON notification_reads TO {{runtime_role}};

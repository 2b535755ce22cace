package dev.stagger;

import java.util.List;

/**
 * One step's answer: every action, in order, and when to step next (host ns, the same clock as
 * {@code nowNs}), or {@code null} when nothing is due until an event comes.
 */
public record Actions(List<Action> actions, Long nextWakeupNs) {
    public Actions {
        actions = List.copyOf(actions);
    }
}

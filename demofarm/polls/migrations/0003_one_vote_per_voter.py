from django.db import migrations, models


def drop_second_votes(apps, schema_editor):
    """Before the constraint: keep each voter's first vote in each poll."""
    Vote = apps.get_model("webfarm_polls", "Vote")
    seen = set()
    extra = []
    for vote_id, poll_id, voter in Vote.objects.order_by("cast_at", "id").values_list("id", "poll_id", "voter"):
        if (poll_id, voter) in seen:
            extra.append(vote_id)
        seen.add((poll_id, voter))
    Vote.objects.filter(pk__in=extra).delete()


class Migration(migrations.Migration):
    dependencies = [("webfarm_polls", "0002_vote_counted")]

    operations = [
        migrations.RunPython(drop_second_votes, migrations.RunPython.noop),
        migrations.RemoveIndex(model_name="vote", name="polls_vote_poll_id_9a39f6_idx"),
        migrations.AddConstraint(
            model_name="vote",
            constraint=models.UniqueConstraint(fields=("poll", "voter"), name="one_vote_per_voter"),
        ),
    ]

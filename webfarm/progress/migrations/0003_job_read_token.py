import secrets

from django.db import migrations, models

import webfarm.progress.ids


def give_each_job_its_own_token(apps, schema_editor):
    # A default on AddField would give every existing job the same token.
    Job = apps.get_model("webfarm_progress", "Job")
    for job in Job.objects.filter(read_token="").only("id").iterator():
        Job.objects.filter(pk=job.pk).update(read_token=secrets.token_urlsafe(16))


class Migration(migrations.Migration):
    dependencies = [("webfarm_progress", "0002_job_retries")]

    operations = [
        migrations.AddField(
            model_name="job",
            name="read_token",
            field=models.CharField(default="", editable=False, max_length=22),
            preserve_default=False,
        ),
        migrations.RunPython(give_each_job_its_own_token, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="job",
            name="read_token",
            field=models.CharField(default=webfarm.progress.ids.new_read_token, editable=False, max_length=22),
        ),
    ]

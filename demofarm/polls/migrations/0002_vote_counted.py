from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("webfarm_polls", "0001_initial")]

    operations = [migrations.RenameField(model_name="vote", old_name="synced", new_name="counted")]

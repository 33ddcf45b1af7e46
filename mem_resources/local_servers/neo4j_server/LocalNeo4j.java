import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;

/**
 * Runs an embedded Neo4j Community DBMS with Bolt enabled until the JVM is told to stop.
 * All settings come from the neo4j.conf the Python launcher writes (args: home dir, conf file,
 * password file). With auth enabled, the password file (read, then deleted, so the password never
 * shows in the process list) replaces the default password of user neo4j while that one still has
 * to be changed, as `neo4j-admin dbms set-initial-password` does for a packaged server.
 */
public final class LocalNeo4j {
    public static void main(String[] args) throws InterruptedException, IOException {
        if (args.length != 3) {
            System.err.println("usage: LocalNeo4j <home-dir> <neo4j.conf> <initial-password-file>");
            System.exit(2);
        }
        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(Path.of(args[0]))
                .loadPropertiesFromFile(Path.of(args[1]))
                .build();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            dbms.shutdown();
            stopped.countDown();
        }, "neo4j-shutdown"));
        Path passwordFile = Path.of(args[2]);
        if (Files.exists(passwordFile)) {
            String password = Files.readString(passwordFile).strip();
            Files.delete(passwordFile);
            setInitialPassword(dbms.database("system"), password);
        }
        System.out.println("memtend-local-neo4j: started");
        System.out.flush();
        stopped.await();
    }

    private static void setInitialPassword(GraphDatabaseService system, String password) {
        boolean pending = system.executeTransactionally(
                "SHOW USERS YIELD user, passwordChangeRequired "
                        + "WHERE user = 'neo4j' RETURN passwordChangeRequired",
                Map.of(), result -> result.hasNext() && (Boolean) result.next().get("passwordChangeRequired"));
        if (pending) {
            system.executeTransactionally(
                    "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED",
                    Map.of("password", password));
        }
    }
}
